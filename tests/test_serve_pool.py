"""The HTTP service's worker processes: a diagnosis past the time limit costs its worker,
never a core that keeps burning; a full queue is refused at once; results equal the library's."""

from __future__ import annotations

import threading
import time

import pytest

from diagnose.api import diagnose_text
from diagnose.serve_pool import Busy, DiagnosePool

CRASH = """\
Traceback (most recent call last):
  File "/srv/engine/runner.py", line 12, in prefill
    hidden = layer(hidden)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.
"""


def test_a_worker_answers_what_the_library_answers() -> None:
    pool = DiagnosePool(1, 0, timeout_s=60)
    try:
        got = pool.diagnose(CRASH)
        want = diagnose_text(CRASH, source="request")
        assert (got.cause, got.fatal, got.primary and got.primary.rule_id) == (
            want.cause,
            want.fatal,
            want.primary and want.primary.rule_id,
        )
        assert len(pool.pids()) == 1  # the worker went back to the pool
    finally:
        pool.close()


def test_past_the_time_limit_the_worker_is_killed_and_replaced() -> None:
    pool = DiagnosePool(1, 0, timeout_s=60)
    try:
        pool.diagnose(CRASH)  # a warm worker
        (pid,) = pool.pids()
        pool.timeout_s = 1e-6  # no diagnosis is that fast
        with pytest.raises(TimeoutError, match="longer than"):
            pool.diagnose(CRASH * 2000)
        assert pool.killed == 1 and pool.pids() == []
        worker_gone = not _alive(pid)
        assert worker_gone, "the timed-out worker must not keep running"
        pool.timeout_s = 60
        assert pool.diagnose(CRASH).cause == "cuda-oom"  # a fresh worker took its place
        assert pool.pids() and pool.pids() != [pid]
    finally:
        pool.close()


def test_a_full_queue_is_refused_at_once_and_a_free_place_waits() -> None:
    pool = DiagnosePool(1, 1, timeout_s=60)
    try:
        held = pool._acquire()  # the one worker is busy
        waiter = threading.Thread(target=pool.diagnose, args=(CRASH,))
        waiter.start()  # takes the one queue place
        deadline = time.monotonic() + 30
        while pool._waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert pool._waiting == 1
        with pytest.raises(Busy):  # no place left: refused without waiting
            pool.diagnose(CRASH)
        pool._release(held)  # the waiter gets the worker and finishes
        waiter.join(timeout=60)
        assert not waiter.is_alive() and pool._waiting == 0
    finally:
        pool.close()


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state where /proc exists.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_a_worker_left_above_the_memory_limit_is_replaced_in_the_background() -> None:
    pool = DiagnosePool(1, 0, timeout_s=60, max_rss_mb=1)  # every warm worker is above 1 MB
    try:
        assert pool.diagnose(CRASH).cause == "cuda-oom"  # the answer still comes back
        assert pool.retired == 1
        deadline = time.monotonic() + 60
        while not pool.pids() and time.monotonic() < deadline:
            time.sleep(0.1)  # its successor warms up off the request path
        (pid,) = pool.pids()
        pool.max_rss = 0
        assert pool.diagnose(CRASH).cause == "cuda-oom"
        assert pool.pids() == [pid] and pool.retired == 1
    finally:
        pool.close()


def test_a_worker_under_the_memory_limit_is_kept() -> None:
    pool = DiagnosePool(1, 0, timeout_s=60, max_rss_mb=4096)
    try:
        pool.diagnose(CRASH)
        (pid,) = pool.pids()
        pool.diagnose(CRASH)
        assert pool.pids() == [pid] and pool.retired == 0
    finally:
        pool.close()
