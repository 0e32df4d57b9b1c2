"""Helpers for tests of the broker and of transport plugins (importable by plugin authors).

`serving` starts a whole broker (service and transports) inside the calling process; the
fixtures, the chaos helper and the transport conformance suite live in the submodules.
"""

from .inprocess import RunningBroker, serving

__all__ = ["RunningBroker", "serving"]
