"""The marker of a field whose JSON the core decodes itself.

Some request fields hold JSON whose refusals have an order and codes of their own (a batch of
timer ops answers the first failure in input order across the wire's spelling and the
database's value rules; a push item or an ack is refused per item). A struct decode would
answer the first failure in its own order, so these fields travel as the JSON they are, typed
`Annotated[Any, Decoded(shape)]`: `shape` is the msgspec type that documents them (the HTTP
schema is generated from it) and the core's decoder is the one place their rules live.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Decoded", "decoded_shape"]


@dataclasses.dataclass(frozen=True)
class Decoded:
    """`Annotated[Any, Decoded(shape)]`: JSON the core decodes, shaped like `shape`."""

    shape: Any


def decoded_shape(hint: Any) -> Any | None:
    """The shape a field's type hint declares (`Annotated[Any, Decoded(shape)]`), else None."""
    for extra in getattr(hint, "__metadata__", ()):
        if isinstance(extra, Decoded):
            return extra.shape
    return None
