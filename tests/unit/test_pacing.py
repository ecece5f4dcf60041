import asyncio

import pytest

from infer_prof.loadgen.pacing import SendPacer


def test_at_most_per_turn_callers_pass_per_loop_turn():
    async def main() -> list[int]:
        pacer = SendPacer(per_turn=3)
        turn = 0
        passed_at: list[int] = []

        async def ticker() -> None:
            nonlocal turn
            for _ in range(20):
                turn += 1
                await asyncio.sleep(0)

        async def caller() -> None:
            await pacer.turn()
            passed_at.append(turn)

        t = asyncio.create_task(ticker())
        await asyncio.gather(*(caller() for _ in range(10)))
        await t
        assert pacer.waited == 7
        return passed_at

    passed = asyncio.run(main())
    assert len(passed) == 10
    counts: dict[int, int] = {}
    for x in passed:
        counts[x] = counts.get(x, 0) + 1
    assert max(counts.values()) <= 3  # never more than per_turn in one turn
    assert len(counts) >= 4  # 10 callers at 3 per turn need at least 4 turns


def test_a_lone_caller_is_not_delayed():
    async def main() -> int:
        pacer = SendPacer(per_turn=1)
        for _ in range(5):
            await pacer.turn()
            await asyncio.sleep(0.001)  # one request at a time: each passes at once
        return pacer.waited

    assert asyncio.run(main()) == 0


def test_cancelled_waiter_leaves_the_queue_and_the_others_still_pass():
    async def main() -> tuple[int, int]:
        pacer = SendPacer(per_turn=1)
        await pacer.turn()
        waiters = [asyncio.create_task(pacer.turn()) for _ in range(3)]
        await asyncio.sleep(0)  # all three are queued now (the first turn is used up)
        last = waiters[-1]
        last.cancel()
        with pytest.raises(asyncio.CancelledError):
            await last
        queued_after_cancel = len(pacer.waiters)
        await asyncio.gather(*waiters[:-1])
        return queued_after_cancel, len(pacer.waiters)

    queued_after_cancel, left = asyncio.run(main())
    assert queued_after_cancel <= 2 and left == 0


def test_per_turn_must_be_positive():
    with pytest.raises(ValueError, match="per_turn"):
        SendPacer(0)


def test_run_calls_at_once_when_the_turn_has_room_and_later_otherwise_in_order():
    async def main() -> tuple[list[tuple[str, int]], list[str]]:
        pacer = SendPacer(per_turn=2)
        turn = 0
        log: list[tuple[str, int]] = []

        async def ticker() -> None:
            nonlocal turn
            for _ in range(20):
                turn += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        ran_now = []
        pacer.run(lambda: ran_now.append("a"))  # room: runs inside run()
        pacer.run(lambda: ran_now.append("b"))
        pacer.run(lambda: log.append(("c", turn)))  # the turn's budget of 2 is used: later
        sender = asyncio.create_task(pacer.turn())  # queued behind c
        pacer.run(lambda: log.append(("d", turn)))
        await sender
        log.append(("send", turn))
        await t
        return log, ran_now

    log, ran_now = asyncio.run(main())
    assert ran_now == ["a", "b"]
    names = [name for name, _ in log]
    assert names[0] == "c" and sorted(names) == ["c", "d", "send"]  # c was queued first
    assert min(n for _, n in log) >= 1  # nothing deferred ran in the turn that filled the budget


def test_run_shares_the_budget_with_turn():
    async def main() -> int:
        pacer = SendPacer(per_turn=1)
        await pacer.turn()  # the budget of this turn is used
        ran: list[int] = []
        pacer.run(lambda: ran.append(1))
        assert ran == [] and pacer.waited == 1
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return len(ran)

    assert asyncio.run(main()) == 1


def test_a_failing_deferred_call_does_not_stop_the_pacer():
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        errors: list[str] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx["message"]))
        pacer = SendPacer(per_turn=1)
        await pacer.turn()  # this turn's budget is used: what follows is deferred

        def boom() -> None:
            raise RuntimeError("bad response")

        pacer.run(boom)
        ran: list[str] = []
        pacer.run(lambda: ran.append("after"))
        await asyncio.wait_for(pacer.turn(), timeout=1.0)  # still passes
        for _ in range(3):
            await asyncio.sleep(0)
        return errors + ran

    assert asyncio.run(main()) == ["paced callback failed", "after"]


def test_closed_loops_of_up_to_256_streams_are_not_paced():
    from infer_prof.loadgen.pacing import PACE_ABOVE_STREAMS, SENDS_PER_TURN, per_turn_for

    assert PACE_ABOVE_STREAMS == 256
    assert per_turn_for(1) == 2 and per_turn_for(256) == 512  # all ends and sends in one turn
    assert per_turn_for(257) == SENDS_PER_TURN
