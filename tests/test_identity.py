"""queen_timers.identity: the Authenticator turns a verified bearer token into an Identity,
including
the token's expiry (so a transport that keeps an identity for a connection never decodes the
token a second time)."""

from __future__ import annotations

import time
import uuid

import jwt
import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import ANONYMOUS, DEFAULT_TENANT, Authenticator, Identity
from queen_timers.settings import Settings

SECRET = "identity-test-secret-0123456789abcdef0123"


def _auth(**overrides) -> Authenticator:
    return Authenticator(Settings({"jwt_secret": SECRET, **overrides}, environ={}))


def _token(**claims) -> str:
    return jwt.encode({"sub": "alice", **claims}, SECRET, algorithm="HS256")


def test_identity_defaults_never_expire():
    assert Identity().expires_at is None
    assert ANONYMOUS.expires_at is None


def test_identify_carries_the_verified_exp():
    tenant = uuid.uuid4()
    exp = int(time.time()) + 3600
    ident = _auth().identify(_token(tenant=str(tenant), admin=True, exp=exp))
    assert ident == Identity(tenant=tenant, subject="alice", admin=True, expires_at=float(exp))
    assert isinstance(ident.expires_at, float)


def test_identify_without_exp_never_expires():
    ident = _auth().identify(_token())
    assert ident == Identity(tenant=DEFAULT_TENANT, subject="alice", admin=False)
    assert ident.expires_at is None


def test_a_fractional_exp_is_read_as_pyjwt_checks_it():
    # pyjwt compares int(exp) with the clock; the identity ends at that same instant.
    exp = int(time.time()) + 3600
    assert _auth().identify(_token(exp=exp + 0.75)).expires_at == float(exp)


def test_without_authentication_the_anonymous_identity_never_expires():
    auth = Authenticator(Settings({}, environ={}))
    assert not auth.enabled
    assert auth.identify(_token(exp=int(time.time()) + 60)) is ANONYMOUS


@pytest.mark.parametrize("exp", [int(time.time()) - 10, "soon", None])
def test_an_expired_or_malformed_exp_is_refused(exp):
    with pytest.raises(QueenError) as ei:
        _auth().identify(_token(exp=exp))
    assert (ei.value.code, ei.value.reason, ei.value.status) == (
        "unauthorized",
        "invalid_token",
        401,
    )
