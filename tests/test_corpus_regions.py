"""Every real crash log of the dev corpus yields a region that holds its key error line.

The key error line is derived generically, never per case: lines of the raw log that match
a broad error vocabulary AND the vocabulary of the labelled cause; when no line matches
both, the broad vocabulary alone.  A log with no line in the broad vocabulary has no key
error line (one case: a bare ninja command whose ERROR level was a stripped prefix) and is
not counted.  A case passes when some region's body holds one of its key lines.
Distractor logs labelled ``unknown`` are not required to yield anything.  Skips cleanly
when ``../shared`` is absent.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from diagnose.ingest.normalize import normalize
from diagnose.model import LogLine
from diagnose.regions import REGION_KINDS, find_regions

# Broad "something went wrong" vocabulary, independent of diagnose.regions' own tables.
_BROAD = re.compile(
    r"error|fail|assert|exception|fault|killed|out of memory|\boom\b|timeout|timed out"
    r"|illegal|misaligned|no kernel image|not supported|unsupported|status_|skipp|abort"
    r"|panicked|too old|too small|exceed|insufficient|larger than|not enough|no available"
    r"|cannot|resource_exhausted|out ?of ?resource|outofmemory|not defined",
    re.IGNORECASE,
)

# What a line naming each cause tends to say (taxonomy in shared/corpus/README.md).
_CAUSE = {
    "smem-overflow": r"shared memory|OutOfResources|out of resource|Error Internal|smem",
    "tactic-skipped": r"tactic|Skipp|Cannot profile|valid GEMM config",
    "arch-unsupported": r"no kernel image|not supported|unsupported|invalid device function"
    r"|\bsm_?\d+|\barch\b|architecture|fp8e4nv|Assertion",
    "a2a-buffer-config": r"num_max|EP_HOST_ASSERT|Assertion|BUFFSIZE|too small|chunk",
    "a2a-buffer-oom": r"out of memory|\bOOM|cuMemCreate|alloc",
    "cuda-oom": r"out of memory|OutOfMemory|\bOOM|RESOURCE_EXHAUSTED|exceed allowed memory",
    "kv-cache-oom": r"KV cache|cache blocks|Not enough memory|max_total_tokens|profiled value"
    r"|mem-fraction|gpu_memory_utilization",
    "illegal-memory-access": r"illegal memory access|misaligned address|device-side assert"
    r"|unspecified launch failure|illegal instruction|TMA descriptor",
    "nccl-timeout": r"watchdog|timeout|timed out|unspecified launch failure",
    "nccl-error": r"NCCL|nvshmem|DeepEP|invalid resource handle|non-zero status|error status",
    "cublas-error": r"cublas",
    "cuda-version-mismatch": r"driver|PTX|ptxas|toolchain|forward compatibility|sm_\d+a?",
    "jit-build-failure": r"error:|ninja|build|nvcc|FAILED|PassManager|CompilationError",
}


@pytest.fixture(scope="module")
def corpus() -> Path:
    """The dev corpus folder, or skip when ../shared is not checked out beside the repo."""
    shared = Path(__file__).resolve().parents[1].parent / "shared"
    dev = shared / "corpus" / "dev"
    if not dev.is_dir():
        pytest.skip("../shared/corpus/dev is not available")
    return dev


def _key_lines(lines: list[LogLine], cause: str) -> list[int]:
    """Numbers of the lines that carry the failure, by the rule in the module docstring.

    The vocabularies run on normalised text, so a log level that was only a prefix
    (``ERROR 03-05 09:56:09 [x.py:880]``) does not make a line an error line.
    """
    cause_re = re.compile(_CAUSE[cause], re.IGNORECASE)
    broad = [line for line in lines if _BROAD.search(line.text)]
    both = [line.number for line in broad if cause_re.search(line.text)]
    return both or [line.number for line in broad]


def _covered(case: Path) -> tuple[str, bool, int, int]:
    """Return (cause, any key line covered, key lines covered, key lines) for one case."""
    label = tomllib.loads(case.with_suffix(".toml").read_text(encoding="utf-8"))
    text = case.read_text(encoding="utf-8", errors="replace")
    lines = normalize(text)
    regions = find_regions(lines)
    assert all(r.kind in REGION_KINDS for r in regions)
    cause = str(label["cause"])
    if cause not in _CAUSE:
        return cause, True, 0, 0
    keys = _key_lines(lines, cause)
    in_body = {line.number for r in regions for line in r.body}
    hits = sum(k in in_body for k in keys)
    return cause, hits > 0, hits, len(keys)


def test_every_case_has_a_region_with_its_key_line(corpus: Path) -> None:
    """All labelled (non-``unknown``) cases pass; the failures are listed when not."""
    failed: list[str] = []
    total = 0
    for case in sorted(corpus.glob("*.log")):
        cause, ok, _, keys = _covered(case)
        if cause == "unknown" or keys == 0:
            continue
        total += 1
        if not ok:
            failed.append(case.stem)
    assert total > 0
    assert failed == [], f"{len(failed)}/{total} cases without their key line: {failed}"


def test_unknown_cases_do_not_break_the_finder(corpus: Path) -> None:
    """Distractors may yield regions; they must yield well-formed ones."""
    for case in sorted(corpus.glob("*.log")):
        label = tomllib.loads(case.with_suffix(".toml").read_text(encoding="utf-8"))
        if label["cause"] != "unknown":
            continue
        for region in find_regions(normalize(case.read_text(encoding="utf-8"))):
            assert region.lines[0] <= region.message_line <= region.lines[1]
            assert region.body and region.count >= 1
