"""Webhook targets: where a delivery plugin sends the messages of a queue (docs/guides/webhooks.md).

The core stores and checks targets and seals their signing secrets; it sends nothing. The HTTP
delivery is a plugin (plugins/webhooks) that pops a target's queue like any consumer.
"""
