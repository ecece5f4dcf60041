"""A server's per-token CPU cost, simulated: the synthetic server's ``--cost-us`` burns this
much of its own thread's CPU per streamed token, as a real API server's detokenising and
serialising does (:mod:`infer_prof.servers.synthetic`)."""

from __future__ import annotations

import time


def burn_cpu(ns: int) -> None:
    """Busy-wait until this thread has used ``ns`` more nanoseconds of CPU time
    (``CLOCK_THREAD_CPUTIME_ID``): time spent descheduled does not count, so the server really
    takes that much CPU from the cores it shares, as a real server's per-token work does.
    It spins on the cheap wall clock and checks the thread's CPU clock (a ~1 us system call
    here) only when the wall says the time is up, so it overshoots by about one such call
    (:func:`cpu_clock_call_ns`, which the server takes off what it asks for)."""
    cpu = time.thread_time_ns
    wall = time.perf_counter_ns
    end = cpu() + ns
    left = ns
    while left > 0:
        until = wall() + left
        while wall() < until:
            pass
        left = end - cpu()


def cpu_clock_call_ns(samples: int = 200) -> int:
    """The median cost of one ``burn_cpu(0)`` (a thread-CPU clock read and the call), ns."""
    costs = []
    for _ in range(samples):
        t0 = time.thread_time_ns()
        burn_cpu(0)
        costs.append(time.thread_time_ns() - t0)
    costs.sort()
    return costs[len(costs) // 2]
