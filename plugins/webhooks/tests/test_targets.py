"""Managing targets: every refusal is a clear machine-readable error that changes nothing,
secrets are sealed at rest and never shown back, rotation keeps a target signing, and the
TCP wire reaches the same operations."""

from __future__ import annotations

import pytest

from queen_timers.errors import QueenError
from queen_timers.identity import Identity
from queen_timers.testing.fixtures import started_broker
from queen_timers.webhooks.secrets import generate

A = Identity(subject="a")
URL = "https://hooks.example.com/in"


def _t(**fields):
    return {"name": "t", "queue": "q", "url": URL, **fields}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "webhook_bad_body"),
        (_t(url="ftp://example.com/x"), "webhook_url_refused"),
        (_t(url="http://user:pw@example.com/x"), "webhook_url_refused"),
        (_t(url="http://127.0.0.1:8080/x"), "webhook_url_refused"),
        (_t(url="http://localhost/x"), "webhook_url_refused"),
        (_t(url="http://169.254.169.254/latest/meta-data"), "webhook_url_refused"),
        (_t(url="http://[::ffff:10.0.0.1]/x"), "webhook_url_refused"),
        (_t(url="http://192.168.1.20/x"), "webhook_url_refused"),
        (_t(timeoutMs=5), "webhook_bad_field"),
        (_t(method="GET"), "webhook_bad_field"),
        (_t(tenant="00000000-0000-0000-0000-000000000002"), "webhook_bad_field"),
        (_t(name="a b"), "webhook_bad_field"),
        (_t(name=".."), "webhook_bad_field"),
        (_t(name="."), "webhook_bad_field"),
        (_t(headers={"webhook-signature": "v1,forged"}), "webhook_reserved_header"),
        (_t(headers={"x-a": "b\r\nx-evil: 1"}), "webhook_bad_header"),
        (_t(headers={"bad name": "v"}), "webhook_bad_header"),
        (_t(backoffMs=5000, maxBackoffMs=1000), "webhook_bad_backoff"),
        (_t(secret="whsec_short"), "webhook_bad_secret"),
        (_t(secret="plain"), "webhook_bad_secret"),
    ],
)
async def test_a_bad_target_is_refused_and_changes_nothing(queen, body, reason):
    with pytest.raises(QueenError) as e:
        await queen.webhook_target_set(A, body)
    err = e.value.to_dict()
    assert (e.value.status, err["reason"]) == (400, reason), err
    assert set(err) >= {"error", "reason", "detail"} and err["detail"]
    assert (await queen.webhook_targets_list(A))["targets"] == []


async def test_secrets_are_sealed_and_never_shown_back(queen, conn):
    given = generate()
    made = await queen.webhook_target_set(
        A, _t(secret=given, headers={"Authorization": "Bearer s3cr3t", "x-plain": "ok"})
    )
    assert made["status"] == "created" and "secret" not in made  # a given secret is not echoed
    view = await queen.webhook_target_get(A, "t")
    assert [set(s) for s in view["secrets"]] == [{"id", "createdAt"}]
    assert view["headers"] == {"Authorization": "***", "x-plain": "ok"}
    stored = await conn.fetchval("SELECT sealed FROM queen.webhook_secrets")
    assert given.encode() not in stored and given[6:].encode() not in stored
    # the delivery reads it unsealed, with the real header
    (target,) = await queen.webhook_delivery_targets()
    assert target.secrets == (given,) and target.headers["Authorization"] == "Bearer s3cr3t"


async def test_rotation_keeps_the_target_signing(queen):
    first = (await queen.webhook_target_set(A, _t()))["secret"]
    second = await queen.webhook_secret_add(A, "t")
    assert second["value"].startswith("whsec_") and second["id"] != first["id"]
    (target,) = await queen.webhook_delivery_targets()
    assert set(target.secrets) == {first["value"], second["value"]}
    gone = await queen.webhook_secret_delete(A, "t", first["id"])
    assert gone["deleted"] is True
    with pytest.raises(QueenError) as e:
        await queen.webhook_secret_delete(A, "t", second["id"])
    assert e.value.to_dict()["reason"] == "webhook_last_secret"
    (target,) = await queen.webhook_delivery_targets()
    assert target.secrets == (second["value"],)  # the refused delete changed nothing


async def test_one_target_per_queue_and_tenants_do_not_meet(queen):
    await queen.webhook_target_set(A, _t())
    with pytest.raises(QueenError) as e:
        await queen.webhook_target_set(A, _t(name="other"))
    assert (e.value.status, e.value.to_dict()["reason"]) == (409, "webhook_queue_taken")
    b = Identity(tenant=__import__("uuid").UUID(int=7), subject="b")
    await queen.webhook_target_set(b, _t())  # another tenant's queue of the same name
    assert [t["name"] for t in (await queen.webhook_targets_list(b))["targets"]] == ["t"]
    with pytest.raises(QueenError) as e:
        await queen.webhook_attempts(b, "nope")
    assert e.value.status == 404
    assert (await queen.webhook_target_delete(b, "t"))["deleted"] is True
    assert [t["name"] for t in (await queen.webhook_targets_list(A))["targets"]] == ["t"]


async def test_update_replaces_every_field_but_the_secrets(queen):
    made = await queen.webhook_target_set(A, _t(concurrency=3, paused=True))
    again = await queen.webhook_target_set(A, _t(url=URL + "2"))
    assert again["status"] == "updated" and "secret" not in again
    view = again["target"]
    assert (view["url"], view["concurrency"], view["paused"]) == (URL + "2", 8, False)
    assert [s["id"] for s in view["secrets"]] == [made["secret"]["id"]]


async def test_a_broker_without_the_key_refuses_to_store_a_secret(db_url):
    async with started_broker(db_url, encryption_key=None) as q:
        with pytest.raises(QueenError) as e:
            await q.webhook_target_set(A, _t())
        assert e.value.to_dict()["reason"] == "encryption_key_missing"
        assert (await q.webhook_targets_list(A))["targets"] == []
    async with started_broker(db_url) as q:
        await q.webhook_target_set(A, _t())
    async with started_broker(db_url, encryption_key=None) as q:
        # an update that stores no secret needs no key; one that adds a secret does
        assert (await q.webhook_target_set(A, _t(concurrency=2)))["status"] == "updated"
        with pytest.raises(QueenError):
            await q.webhook_target_set(A, _t(secret=generate()))


async def test_allow_listed_networks_may_be_reached(db_url):
    async with started_broker(db_url, webhook_allow_networks="10.1.0.0/16") as q:
        await q.webhook_target_set(A, _t(url="http://10.1.2.3:8080/hook"))
        with pytest.raises(QueenError):
            await q.webhook_target_set(A, _t(name="u", queue="r", url="http://10.2.0.1/x"))


async def test_the_attempts_record_is_bounded_per_target(queen):
    import datetime as dt

    from queen_timers.webhooks.targets import Attempt

    await queen.webhook_target_set(A, _t())
    await queen.webhook_target_set(A, _t(name="u", queue="r"))
    at = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)

    def row(target, i):
        return Attempt(A.tenant, target, f"msg_{i}", 1, at, 500, 3, "retry", "HTTP 500")

    await queen.webhook_attempts_record([row("t", i) for i in range(5)], keep=3)
    await queen.webhook_attempts_record([row("u", 9)], keep=3)
    page = await queen.webhook_attempts(A, "t")
    assert [a["webhookId"] for a in page["attempts"]] == ["msg_4", "msg_3", "msg_2"]
    assert [a["webhookId"] for a in (await queen.webhook_attempts(A, "u"))["attempts"]] == ["msg_9"]
    older = await queen.webhook_attempts(A, "t", limit=2)
    assert older["nextBefore"] is not None
    rest = await queen.webhook_attempts(A, "t", before=older["nextBefore"])
    assert [a["webhookId"] for a in rest["attempts"]] == ["msg_2"]
    only = await queen.webhook_attempts(A, "t", webhook_id="msg_3")
    assert [a["webhookId"] for a in only["attempts"]] == ["msg_3"]
