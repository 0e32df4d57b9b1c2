"""Helpers for tests of the broker and of transport plugins (importable by plugin authors)."""
