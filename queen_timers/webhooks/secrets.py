"""Signing secrets of webhook targets, in the Standard Webhooks form `whsec_<base64>`, sealed
with the broker's key (QUEEN_ENCRYPTION_KEY) before they are stored."""

from __future__ import annotations

import base64
import binascii
import secrets

from ..crypto import Cipher

__all__ = ["SecretError", "generate", "new_id", "parse", "seal", "unseal"]

PREFIX = "whsec_"
MIN_BYTES, MAX_BYTES = 24, 64
GENERATED_BYTES = 32


class SecretError(ValueError):
    pass


def parse(text: str) -> bytes:
    """The key bytes of `whsec_<base64>` (24 to 64 bytes, as the Standard Webhooks spec
    recommends)."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise SecretError(f"a signing secret starts with {PREFIX!r}")
    try:
        key = base64.b64decode(text[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise SecretError("a signing secret is whsec_ followed by base64") from None
    if not MIN_BYTES <= len(key) <= MAX_BYTES:
        raise SecretError(f"a signing secret holds {MIN_BYTES} to {MAX_BYTES} bytes")
    return key


def generate() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(GENERATED_BYTES)).decode()


def new_id() -> str:
    """A secret's public name: random, so it says nothing of the value."""
    return "sec_" + secrets.token_hex(6)


def seal(cipher: Cipher, text: str) -> bytes:
    return cipher.encrypt(text.encode())


def unseal(cipher: Cipher, sealed: bytes) -> str:
    return cipher.decrypt(sealed).decode()
