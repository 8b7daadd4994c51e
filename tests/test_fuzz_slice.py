"""A fixed-seed slice of the fuzz campaign (bench/fuzz.py): the standing check CI runs.

The full campaign (a million inputs, several workers) is run by hand and recorded in
bench/results/fuzz.md; this slice runs its first inputs in this process, every family and
target among them, and fails naming each failing input's index for ``--replay``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fuzz.py"
SLICE = 1500  # about 25 s on one core; every family and target is drawn


@pytest.fixture(scope="module")
def fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crashkb_fuzz", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["crashkb_fuzz"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_generation_is_reproducible(fuzz: ModuleType) -> None:
    logs, rules = fuzz.seed_logs(), fuzz.rule_files()
    for index in (0, 17, 799):
        a = fuzz.generate(3, index, logs, rules)
        b = fuzz.generate(3, index, logs, rules)
        assert (a.family, a.target, a.payload, a.extra) == (b.family, b.target, b.payload, b.extra)


def test_fixed_seed_slice_has_no_failure(fuzz: ModuleType, tmp_path: Path) -> None:
    # In a child, as the campaign runs it: the bounds (2 s, 300 MB) are an input's own, and
    # this process has grown with the tests before it (a bomb's 120 MB on top of the suite's
    # own pages once read as 301 MB in CI).
    stderr = tmp_path / "stderr"
    tally = fuzz.run_chunk(1, 0, SLICE, 2.0, 300.0, 120.0, stderr=stderr)
    # The library never prints: not even RE2's C++ logging of a DFA out of its budget,
    # which once wrote a line per hostile input to the user's terminal.
    assert "re2.cc" not in stderr.read_text(errors="replace")
    targets = {key.split("/")[1] for key in tally.counts}
    assert targets == {"diagnose_text", "demangle", "parse_name", "reader", "rule", "http"}
    assert sum(tally.counts.values()) == SLICE
    assert not tally.failures, "\n".join(
        f"--replay {f['index']} --seed 1: {f['family']}/{f['target']}: {f['error']}"
        for f in tally.failures
    )


#: Inputs on which a campaign once failed, as (seed, index): replayed under the same bounds.
#: (1, 23938) a 1 MiB paste of 16k identical NCCL warnings with CR line ends (2.4 CPU s);
#: (3, 23046) a 1 MB frame whose mangled name sent the crash-identity mask quadratic (2.8 s);
#: (3, 32291) a bzip2 bomb whose lines the harness counted from the 8 MiB text only.
KNOWN_FAILURES = [(1, 23938), (3, 23046), (3, 32291)]


@pytest.mark.parametrize(("seed", "index"), KNOWN_FAILURES)
def test_inputs_a_campaign_failed_on_pass_now(fuzz: ModuleType, seed: int, index: int) -> None:
    # In a child, as the campaign runs them: a peak RSS is only the input's own in a fresh
    # process (this one has grown with the tests before it), and a bomb's pages stay here.
    tally = fuzz.run_chunk(seed, index, index + 1, 2.0, 300.0, 120.0)
    assert sum(tally.counts.values()) == 1 and not tally.failures, tally.failures


def test_harness_catches_an_exception(fuzz: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The slice can fail: a target that raises is reported with its index."""

    def boom(self: object, case: object) -> None:
        raise ValueError("planted")

    monkeypatch.setattr(fuzz.Runner, "_parse_name", boom)
    monkeypatch.setattr(fuzz.Runner, "_demangle", boom)
    tally = fuzz.run_range(1, 0, 60, 2.0, 300.0)
    assert tally.failures and all("planted" in f["error"] for f in tally.failures)


def test_a_hung_input_is_killed_named_and_the_chunk_goes_on(
    fuzz: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop in C code cannot be interrupted from Python: the watchdog outside kills the
    child, names the input it was on, and runs the rest of the chunk in a fresh child."""
    monkeypatch.setenv("CRASHKB_FUZZ_HANG_AT", "3")
    tally = fuzz.run_chunk(1, 0, 6, 2.0, 300.0, limit=15.0)
    assert [f["index"] for f in tally.failures] == [3]
    assert "hung" in tally.failures[0]["error"]
    assert sum(tally.counts.values()) == 6  # 0-2 run again, 3 hung, 4-5 after it
