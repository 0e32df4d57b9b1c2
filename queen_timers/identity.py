"""Who is calling: tenant, producer subject, admin flag, and until when.

Identity comes from authentication only (a verified bearer token), never from a request body:
the service takes it as a separate argument everywhere. Without authentication configured
every caller is the anonymous identity of the default tenant.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import jwt

from .errors import QueenError
from .settings import Settings

__all__ = ["ANONYMOUS", "DEFAULT_TENANT", "Authenticator", "Identity"]

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")


@dataclasses.dataclass(frozen=True)
class Identity:
    tenant: uuid.UUID = DEFAULT_TENANT
    subject: str | None = None  # the producer subject stamped on frames
    admin: bool = False
    # When the verified token stops holding (its `exp`, epoch seconds), or None: it never
    # expires (a token without `exp`, or the anonymous identity). A transport that keeps an
    # identity beyond one request (a connection) compares the clock with this.
    expires_at: float | None = None


ANONYMOUS = Identity(admin=True)  # no auth configured: the operator runs the broker


class Authenticator:
    """Verifies bearer tokens (pyjwt): HS256 with a secret, or RS256/ES256/EdDSA with a public
    key."""

    def __init__(self, settings: Settings):
        self.tenant_claim = settings.jwt_tenant_claim
        self.admin_claim = settings.jwt_admin_claim
        self._key: Any = None
        self._algorithms: list[str] = []
        if settings.jwt_public_key:
            pem = settings.jwt_public_key
            if pem.startswith("@"):
                pem = Path(pem[1:]).read_text()
            self._key = pem
            self._algorithms = ["RS256", "EdDSA", "ES256"]
        elif settings.jwt_secret:
            self._key = settings.jwt_secret
            self._algorithms = ["HS256"]

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def identify(self, bearer: str | None) -> Identity:
        if not self.enabled:
            return ANONYMOUS
        if not bearer:
            raise QueenError("unauthorized", "missing_token", "a bearer token is required", 401)
        try:
            claims = jwt.decode(
                bearer, self._key, algorithms=self._algorithms, options={"require": ["sub"]}
            )
        except jwt.PyJWTError as exc:
            raise QueenError("unauthorized", "invalid_token", str(exc), 401) from None
        tenant = DEFAULT_TENANT
        raw = claims.get(self.tenant_claim)
        if raw is not None:
            try:
                tenant = uuid.UUID(str(raw))
            except ValueError:
                raise QueenError(
                    "unauthorized",
                    "invalid_tenant",
                    f"claim {self.tenant_claim!r} is not a UUID",
                    401,
                ) from None
        sub = claims.get("sub") or None
        # pyjwt has checked `exp` when present: int(exp) succeeds and lies in the future. The
        # token stops holding at that same int(exp), so that is the identity's expiry too.
        exp = claims.get("exp")
        return Identity(
            tenant=tenant,
            subject=str(sub) if sub else None,
            admin=bool(claims.get(self.admin_claim) is True),
            expires_at=None if exp is None else float(int(exp)),
        )
