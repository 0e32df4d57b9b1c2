"""The Queen wire, defined once: msgspec types of every request and answer of the broker.

queen_timers.wire.operations is the table of operations (arguments and answer of each
`Queen` method); timers, log and admin hold the shapes. This package imports only msgspec and
the standard library, so every layer (the service, the transports, the tests) can name it.
"""

from __future__ import annotations

from .decoded import Decoded, decoded_shape
from .operations import OPERATIONS, Arguments, Operation

__all__ = ["OPERATIONS", "Arguments", "Decoded", "Operation", "decoded_shape"]
