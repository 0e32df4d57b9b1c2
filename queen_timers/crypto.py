"""At-rest payload encryption: AES-256-GCM with the key from QUEEN_ENCRYPTION_KEY.

The stored payload is a JSON envelope {"encrypted": b64, "iv": b64, "authTag": b64}, the
shape of the reference broker, with a 12-byte random nonce. A queue may only switch encryption
on when a key is configured (an error otherwise, never silent plaintext).
"""

from __future__ import annotations

import base64
import os

import msgspec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["Cipher", "EncryptionKeyError", "parse_key"]

_TAG = 16


class EncryptionKeyError(ValueError):
    pass


def parse_key(text: str | None) -> bytes | None:
    if not text:
        return None
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise EncryptionKeyError("QUEEN_ENCRYPTION_KEY must be 64 hex characters") from None
    if len(key) != 32:
        raise EncryptionKeyError("QUEEN_ENCRYPTION_KEY must be 64 hex characters (32 bytes)")
    return key


class _Envelope(msgspec.Struct):
    encrypted: str
    iv: str
    authTag: str


_env_decoder = msgspec.json.Decoder(_Envelope)


class Cipher:
    def __init__(self, key: bytes):
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> bytes:
        iv = os.urandom(12)
        sealed = self._aead.encrypt(iv, plaintext, None)
        env = _Envelope(
            encrypted=base64.b64encode(sealed[:-_TAG]).decode(),
            iv=base64.b64encode(iv).decode(),
            authTag=base64.b64encode(sealed[-_TAG:]).decode(),
        )
        return msgspec.json.encode(env)

    def decrypt(self, envelope: bytes) -> bytes:
        env = _env_decoder.decode(envelope)
        iv = base64.b64decode(env.iv)[:12]
        sealed = base64.b64decode(env.encrypted) + base64.b64decode(env.authTag)
        return self._aead.decrypt(iv, sealed, None)
