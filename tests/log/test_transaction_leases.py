"""`requiredLeases` of the transaction wire (client-wire §8): the bundle commits only while every
named lease is still held; otherwise it fails whole (200, success false, reason `lease_lost`)
and applies no push, no ack and no timer."""

from __future__ import annotations

import pytest

from queen_timers.errors import QueenError

from .helpers import later

TIMER = {"op": "schedule", "queue": "later", "delayMs": 60_000, "payload": "e30="}


def _ack(m: dict, **extra) -> dict:
    op = {
        "type": "ack",
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "leaseId": m["leaseId"],
        "status": "completed",
    }
    op.update(extra)
    return op


def _bundle(lease_ids: list | None, *acks: dict, key: str = "k") -> dict:
    return {
        "operations": [*acks, {"type": "push", "items": [{"queue": "out", "payload": 1}]}],
        "requiredLeases": lease_ids,
        "timers": [{**TIMER, "timerKey": key, "txn": f"t-{key}"}],
    }


async def _popped(queen, ident, queue: str = "in", partition: str | None = None, **kw) -> dict:
    await queen.push(
        ident,
        [{"queue": queue, "payload": {"n": 1}, **({"partition": partition} if partition else {})}],
    )
    res = await queen.pop(ident, queue, partition=partition, batch=1, **kw)
    assert res is not None
    return res


async def _nothing_applied(queen, ident, key: str = "k") -> None:
    assert await queen.pop(ident, "out", batch=10) is None
    assert (await queen.timer_peek(ident, "later", key))["found"] is False


async def test_a_held_lease_lets_the_bundle_commit(queen, ident):
    res = await _popped(queen, ident)
    m = res["messages"][0]
    out = await queen.transaction(ident, _bundle([res["leaseId"]], _ack(m)))
    assert out["success"] is True, out
    assert [r["type"] for r in out["results"]] == ["ack", "push", "timer"]
    assert len((await queen.pop(ident, "out", batch=10))["messages"]) == 1
    assert (await queen.timer_peek(ident, "later", "k"))["found"] is True


async def test_a_lease_taken_over_fails_the_bundle_and_changes_nothing(queen, ident):
    await queen.configure_queue(ident, "in", {"leaseTime": 30})
    res = await _popped(queen, ident)
    taken = await queen.pop(ident, "in", batch=1, now=later(60))  # expired, then taken over
    assert taken is not None and taken["leaseId"] != res["leaseId"]
    # No ack in the bundle: only requiredLeases can tell that the lease is gone.
    out = await queen.transaction(ident, _bundle([res["leaseId"]]))
    assert out["success"] is False, out
    assert out["reason"] == "lease_lost" and out["results"] == []
    assert out["leaseId"] == res["leaseId"] and res["leaseId"] in out["error"]
    await _nothing_applied(queen, ident)
    # The new holder's lease is untouched: its ack still completes the batch.
    acked = await queen.ack(
        ident, [{k: v for k, v in _ack(taken["messages"][0]).items() if k != "type"}]
    )
    assert acked[0]["success"] is True and acked[0]["leaseReleased"] is True


async def test_a_released_or_unknown_lease_fails_the_bundle(queen, ident):
    res = await _popped(queen, ident)
    m = res["messages"][0]
    released = await queen.ack(ident, [{k: v for k, v in _ack(m).items() if k != "type"}])
    assert released[0]["leaseReleased"] is True
    for leases in ([res["leaseId"]], ["no-such-lease"], [res["leaseId"], "no-such-lease"]):
        out = await queen.transaction(ident, _bundle(leases))
        assert (out["success"], out["reason"]) == (False, "lease_lost"), (leases, out)
    await _nothing_applied(queen, ident)


async def test_an_expired_lease_nobody_took_is_still_held(queen, ident):
    # As for an ack and a renewal: a lapsed lease that no pop took over is still the holder's
    # (accepting it cannot hand a message to two consumers).
    await queen.configure_queue(ident, "in", {"leaseTime": 30})
    res = await _popped(queen, ident, now=later(-3600))  # its lease ran out an hour ago
    out = await queen.transaction(ident, _bundle([res["leaseId"]], _ack(res["messages"][0])))
    assert out["success"] is True, out


async def test_a_lease_of_another_tenant_is_not_held(queen, ident, tenant_ident):
    res = await _popped(queen, ident)
    out = await queen.transaction(tenant_ident(), _bundle([res["leaseId"]]))
    assert (out["success"], out["reason"]) == (False, "lease_lost")


async def test_an_empty_or_null_list_requires_nothing(queen, ident):
    spellings: tuple[list[str] | None, ...] = ([], None)  # the wire's two ways to say "none"
    for i, leases in enumerate(spellings):
        out = await queen.transaction(ident, _bundle(leases, key=f"k{i}"))
        assert out["success"] is True, out
    body = _bundle([], key="k2")
    del body["requiredLeases"]
    assert (await queen.transaction(ident, body))["success"] is True


@pytest.mark.parametrize("leases", ["L1", [""], [7], [None], ["a\x00b"], {"L": 1}])
async def test_a_malformed_list_is_refused_before_the_database(queen, ident, leases):
    with pytest.raises(QueenError) as ei:
        await queen.transaction(ident, _bundle(leases))
    assert (ei.value.reason, ei.value.status) == ("bad_request", 400)
    assert ei.value.extra["success"] is False and ei.value.extra["results"] == []
    assert "requiredLeases" in ei.value.detail
    await _nothing_applied(queen, ident)


async def test_a_single_required_lease_fences_the_acks_that_name_none(queen, ident):
    # The reference broker lends the bundle's one lease to an ack without its own: such an ack
    # is then refused on a partition that lease does not hold, instead of being applied
    # whoever holds it.
    mine = await _popped(queen, ident, partition="p1")
    theirs = await _popped(queen, ident, partition="p2")
    stray = _ack(theirs["messages"][0])
    del stray["leaseId"]
    out = await queen.transaction(ident, _bundle([mine["leaseId"]], stray))
    assert (out["success"], out["reason"]) == (False, "ack_rejected"), out
    await _nothing_applied(queen, ident)
    # With the ack's own partition under the lent lease it goes through.
    own = _ack(mine["messages"][0])
    del own["leaseId"]
    out = await queen.transaction(ident, _bundle([mine["leaseId"]], own))
    assert out["success"] is True, out
    assert out["results"][0]["leaseReleased"] is True
