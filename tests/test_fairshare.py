"""queen_timers.fairshare.TenantShare: at most `cap` holders per tenant, a tenant's extra
callers wait in line for that tenant's own places, and a caller that goes away while waiting
(or just as it is granted a place) never leaks one."""

import asyncio
import uuid

from queen_timers.fairshare import TenantShare

A, B = uuid.uuid4(), uuid.uuid4()


async def _holder(share, tenant, cap, entered, leave):
    async with share.hold(tenant, cap):
        entered.set()
        await leave.wait()


async def test_a_full_tenant_waits_and_another_tenant_does_not():
    share = TenantShare()
    leave = asyncio.Event()
    ins = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.ensure_future(_holder(share, A, 2, e, leave)) for e in ins]
    await asyncio.wait_for(asyncio.gather(ins[0].wait(), ins[1].wait()), 10)
    assert share.held(A) == 2 and share.waiting(A) == 1 and not ins[2].is_set()

    other = asyncio.Event()
    b = asyncio.ensure_future(_holder(share, B, 2, other, asyncio.Event()))
    await asyncio.wait_for(other.wait(), 10)  # B enters while A is full
    assert share.held(B) == 1
    b.cancel()
    await asyncio.gather(b, return_exceptions=True)
    assert share.held(B) == 0

    leave.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert ins[2].is_set()
    assert share.held(A) == 0 and share.waiting(A) == 0


async def test_a_waiter_that_goes_away_leaves_no_place_behind():
    share = TenantShare()
    leave = asyncio.Event()
    first_in = asyncio.Event()
    first = asyncio.ensure_future(_holder(share, A, 1, first_in, leave))
    await asyncio.wait_for(first_in.wait(), 10)
    waiter = asyncio.ensure_future(_holder(share, A, 1, asyncio.Event(), asyncio.Event()))
    for _ in range(3):
        await asyncio.sleep(0)
    assert share.waiting(A) == 1
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert share.waiting(A) == 0 and share.held(A) == 1
    leave.set()
    await asyncio.wait_for(first, 10)
    assert share.held(A) == 0


async def test_a_place_granted_to_a_caller_cancelled_meanwhile_passes_on():
    share = TenantShare()
    leave = asyncio.Event()
    first_in, third_in = asyncio.Event(), asyncio.Event()
    first = asyncio.ensure_future(_holder(share, A, 1, first_in, leave))
    await asyncio.wait_for(first_in.wait(), 10)
    second = asyncio.ensure_future(_holder(share, A, 1, asyncio.Event(), asyncio.Event()))
    third = asyncio.ensure_future(_holder(share, A, 1, third_in, asyncio.Event()))
    for _ in range(3):
        await asyncio.sleep(0)
    assert share.waiting(A) == 2
    leave.set()
    await asyncio.wait_for(first, 10)  # the place is handed to `second`, not yet running
    second.cancel()  # ... which goes away before it runs: the place passes to `third`
    await asyncio.gather(second, return_exceptions=True)
    await asyncio.wait_for(third_in.wait(), 10)
    assert share.held(A) == 1
    third.cancel()
    await asyncio.gather(third, return_exceptions=True)
    assert share.held(A) == 0 and share.waiting(A) == 0
