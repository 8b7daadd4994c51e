"""pytest's failure reports: the header, frame lines and the lines that hold the exception.

Kernel and serving-engine bugs are often reported as a failing test, pasted as pytest
printed it.  pytest lays a failure out its own way (``--tb=long``, the default)::

    ___________________ test_fused_moe[dtype0-128] ___________________

        def test_fused_moe(m, n, e, topk, dtype):
    >       out = fused_moe(a, w1, w2, score, topk)

    tests/kernels/test_moe.py:41:
    _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
    vllm/model_executor/layers/fused_moe/fused_moe.py:1201: in fused_moe
        return fused_experts(hidden_states, w1, w2)
    ...
    >       fused_moe_kernel[grid](A, B, C, BLOCK_SIZE_M=128, num_stages=4)
    E       triton.runtime.errors.OutOfResources: out of resource: shared memory, ...

    vllm/model_executor/layers/fused_moe/fused_moe.py:620: OutOfResources

Each frame's location comes after its code (``path.py:41:`` for the test itself, ``path.py:N:
in f`` for the functions it called), the exception is on ``E`` lines, and the failure ends
with where it was raised and the exception's class name.  ``--tb=short`` prints the
locations first (``path.py:41: in test_fused_moe``) and has no closing line.
"""

from __future__ import annotations

from diagnose.lazyre import lazy
from diagnose.model import Frame

__all__ = [
    "ends_failure",
    "is_error_line",
    "is_frame_line",
    "is_header",
    "opens_section",
    "parse_pytest_frame",
]

# "path.py:41:" (the test), "path.py:1201: in fused_moe", "path.py:620: OutOfResources".
_FRAME = lazy(r"(\S+\.py):(\d+):(?: in ([^\s(]+)| ([A-Z]\w*))?\s*$")
# "____ test_x[param] ____" (a test), "____ ERROR collecting tests/x.py ____" (collection).
_HEADER = lazy(r"_{3,} \S.*? _{3,}\s*$")
# What ends a failure besides its closing line: the next test's header, a "=== ... ==="
# section rule, or a "--- Captured stderr call ---" section (the captured output is the
# program's own log, read on its own).
_SECTION = lazy(r"={3,} .*? ={3,}\s*$|-{3,} Captured \w+ \w+ -{3,}\s*$|={20,}\s*$")
_ERROR = lazy(r"E {1,64}\S")


def is_header(s: str) -> bool:
    """Is the stripped line ``s`` a failure's header (``____ test_x ____``)?"""
    return s[:3] == "___" and _HEADER.match(s) is not None


def is_frame_line(s: str) -> bool:
    """Is the stripped line ``s`` one of pytest's frame locations?"""
    return ".py:" in s and _FRAME.match(s) is not None


def ends_failure(s: str) -> bool:
    """Is ``s`` the line that closes a ``--tb=long`` failure (``path.py:620: SomeError``)?"""
    m = _FRAME.match(s) if ".py:" in s else None
    return m is not None and m.group(4) is not None


def opens_section(s: str) -> bool:
    """Does ``s`` start the next part of pytest's output (a section rule, captured output)?"""
    return s[:3] in ("===", "---") and _SECTION.match(s) is not None


def is_error_line(text: str) -> bool:
    """Is ``text`` (as logged) one of the ``E   message`` lines that hold the exception?"""
    return text[:1] == "E" and _ERROR.match(text) is not None


def parse_pytest_frame(number: int, text: str) -> Frame | None:
    """The :class:`Frame` of a pytest location line (stripped), else None.

    The test's own line (``path.py:41:``) and the closing line name no function.
    """
    m = _FRAME.match(text) if ".py:" in text else None
    if m is None:
        return None
    file, line, func, _exception = m.groups()
    return Frame(
        log_line=number, dialect="python", symbol=func, function=func, file=file, line=int(line)
    )
