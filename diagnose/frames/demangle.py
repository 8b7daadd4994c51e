"""Demangle Itanium C++ symbols the way C++ loggers print them, without trusting the input.

``demangle`` returns the ``abi::__cxa_demangle`` spelling (what TensorRT-LLM's
``TllmException::getTrace()`` and PyTorch's ``c10::demangle`` print), so frames we
demangle compare equal to frames a logger already demangled.  ``demangle_many`` does the
same for a whole list (a log region's frames) in one exchange with the worker.  This
module is the public API, the result cache and the choice of tier:

1. libstdc++'s ``__cxa_demangle`` in this process (:mod:`diagnose.frames.cxa`), but only
   for names a linear-time check proves cannot explode (:mod:`diagnose.frames.mangled_bound`).
   It is called through ctypes directly rather than through the ``cxxfilt`` package:
   5.0 us against 7.6 us a name and no 26 ms import, so cxxfilt is the tests' oracle only.
2. Every other name goes to one persistent sandboxed worker
   (:mod:`diagnose.frames.demangle_worker`): GNU ``c++filt -i -r`` under ``ulimit``, else
   a Python child under ``RLIMIT_AS``/``RLIMIT_CPU``, with a wall-clock timeout per name.
   Names ``__cxa_demangle`` refuses (about 10 % of real names, almost all because
   libiberty's stack guard refuses any name over 1,024 characters, gcc PR 87675; long
   CUTLASS kernel names are why TensorRT-LLM logs show raw ``_ZN...`` frames) are read
   there with the guard off, which only a sandbox may do.  A worker that dies, times out
   or starts a too-long answer is killed; the name it was reading gets no answer and the
   rest of its batch goes to a fresh worker.  After a few deaths no worker is used.
3. What neither reads, or everything when no worker can run, goes to the pure-Python
   ``demangle`` package under its default ``Limits`` (depth, input and output caps).

Results are kept in an LRU bounded by entries and by characters.  ``read_mangled_prefix``
(:mod:`diagnose.frames.mangled_prefix`) recovers namespace, function name and template
arguments from a name cut mid-way, which no demangler does.  Heavy imports (``ctypes``,
``demangle``, ``subprocess``) happen on first use, so importing this module is cheap.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from diagnose.frames.bounded_lru import BoundedLRU
from diagnose.frames.cxa import CXA_MAX_LEN, cxa_demangle
from diagnose.frames.demangle_worker import WORKER as _WORKER
from diagnose.frames.mangled_bound import inprocess_safe
from diagnose.frames.mangled_prefix import read_mangled_prefix
from diagnose.frames.mangled_shape import (
    MAX_NAME,
    MAX_OUTPUT,
    is_mangled,
    prepare,
    worth_reading,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from diagnose.frames.demangle_session import Session

__all__ = ["demangle", "demangle_in_text", "demangle_many", "is_mangled", "read_mangled_prefix"]

# demangle_many moves the worker's pipes after this many names of its own work, so the
# worker never stalls on a full pipe while this process is busy.
_POLL_EVERY = 32
# A mangled word in free text: llvm-cxxfilt's IsLegalItaniumChar (alnum, '_', '$', '.'),
# which its delimiters.test exercises, not preceded by another such character.
_TEXT_RE = re.compile(r"(?<![A-Za-z0-9_.$])\.?_{1,4}Z[A-Za-z0-9_.$]+")

_CACHE = BoundedLRU(max_entries=16_384, max_chars=16 * 1024 * 1024)


def demangle(symbol: str) -> str:
    """Return the ``__cxa_demangle`` spelling of ``symbol``, or ``symbol`` unchanged.

    Handles ``_Z``/``_ZL`` names, Mach-O ``__Z``, clone suffixes (``.isra.0``, ``.cold``,
    printed as ``[clone .cold]``) and strips ``@GLIBCXX_3.4`` version suffixes.  Never
    raises, never hangs and keeps memory bounded, whatever the input.
    """
    try:
        if not worth_reading(symbol):
            return symbol
        hit = _CACHE.get(symbol)
        if hit is not None:
            return hit
        result = _demangle_uncached(symbol)
        _CACHE.put(symbol, result)
        return result
    except Exception:  # the contract is "never raises": any surprise means "unreadable"
        return symbol


def demangle_many(symbols: Iterable[str]) -> list[str]:
    """``[demangle(s) for s in symbols]``, several times faster on a cold cache.

    Names that need the worker go to it in one batch while this process demangles the
    others, so a list pays one worker start-up and no per-name pipe round trip.  Same
    guarantees as :func:`demangle`: never raises (past iterating ``symbols``), never hangs,
    bounded memory; a hostile name costs one worker restart and falls back on its own.
    """
    items = list(symbols)
    try:
        return _demangle_many(items)
    except Exception:  # never raises: redo the list one name at a time
        return [demangle(s) for s in items]


def demangle_in_text(text: str) -> str:
    """Demangle every mangled word inside free text, keeping everything around it.

    Words are maximal runs of ``[A-Za-z0-9_.$]`` as llvm-cxxfilt splits them, so
    ``lib.so(_ZN3foo3barEv+0x1a)`` becomes ``lib.so(foo::bar()+0x1a)`` while ``Foo._Z3Bar``
    (not a word of its own) stays.  A word that cannot be read is left as written.
    """
    try:
        if "_Z" not in text:
            return text
        return _TEXT_RE.sub(_replace_word, text)
    except Exception:  # never raises: give the text back as it was
        return text


def _replace_word(match: re.Match[str]) -> str:
    return demangle(match.group(0))


def _finish(symbol: str, dot: str, text: str | None) -> str:
    """Put the decorations that belong back; an unread or oversized result gives ``symbol``."""
    if text is None or len(text) > MAX_OUTPUT:
        return symbol
    return dot + text


def _demangle_uncached(symbol: str) -> str:
    """Strip decorations, pick a tier, and put the decorations that belong back."""
    prepared = prepare(symbol)
    if prepared is None:
        return symbol
    dot, core, block = prepared
    # Apple block invocations: __cxa_demangle does not read them, `demangle` does.
    text = _fallback(core) if block else _demangle_itanium(core)
    return _finish(symbol, dot, text)


def _demangle_itanium(core: str) -> str | None:
    """Demangle a plain ``_Z`` name through the tiers; ``None`` when nobody can read it."""
    text = cxa_demangle(core) if inprocess_safe(core) else None
    if text is None:
        # Too big to prove safe here, or refused here: the worker reads both kinds (the
        # second through libiberty without its length guard).
        text = _WORKER.demangle(core)
    if text is None:
        text = _fallback(core)
    return text


def _demangle_many(symbols: list[str]) -> list[str]:
    """The batch path: route every distinct uncached name, run the tiers side by side."""
    out = list(symbols)
    todo: dict[str, list[int]] = {}
    for i, symbol in enumerate(symbols):
        if not (isinstance(symbol, str) and 3 <= len(symbol) <= MAX_NAME and "Z" in symbol[:6]):
            continue  # worth_reading, inlined: this loop sees every name of the batch
        hit = _CACHE.get(symbol)
        if hit is not None:
            out[i] = hit
        elif symbol in todo:
            todo[symbol].append(i)
        else:
            todo[symbol] = [i]
    done: dict[str, str] = {}
    asked: list[_Job] = []  # in the order the worker answers
    spill: list[_Job] = []  # refused here or not provably safe: for the worker
    blocks: list[_Job] = []  # Apple blocks: the `demangle` package's
    # Start the worker only when it has work: a long name (refused here by length) or a
    # batch big enough to share.
    use_worker = _WORKER.usable and (
        len(todo) >= _BATCH_WORKER_MIN or any(len(s) > CXA_MAX_LEN for s in todo)
    )
    # With c++filt as the worker it reads every name: it spends ~6 us of CPU on a name,
    # where the bound check and ctypes call here cost ~10 us.  Measured on the 3,232 real
    # names (CPU ms, this process + worker): all to c++filt 29 + 28; shared 45 + 21.
    # The Python worker costs more per name (29 + 72 against 61 + 51 when shared), so then
    # this process reads the short names itself and sends only the rest.
    native = use_worker and _WORKER.native

    def run(session: Session | None) -> None:
        # Classifying, reading here and handing chunks over are interleaved, so the
        # worker starts reading while this process is still preparing names.
        chunk: list[_Job] = []
        for count, symbol in enumerate(todo):
            if session is not None and count % _POLL_EVERY == 0:
                session.poll()  # keep both pipes moving while this process is busy
            prepared = prepare(symbol)
            if prepared is None:
                done[symbol] = symbol
                continue
            dot, core, block = prepared
            job = (symbol, dot, core)
            if block:
                blocks.append(job)
            elif session is not None and (native or len(core) > CXA_MAX_LEN):
                chunk.append(job)
                if len(chunk) >= _CHUNK:
                    _hand_over(session, chunk, asked)
            else:
                safe = len(core) <= CXA_MAX_LEN and inprocess_safe(core)
                text = cxa_demangle(core) if safe else None
                if text is None:
                    spill.append(job)
                    if session is not None and len(spill) >= _CHUNK:
                        _hand_over(session, spill, asked)
                else:
                    done[symbol] = _finish(symbol, dot, text)
        if session is not None:
            _hand_over(session, chunk, asked)
            _hand_over(session, spill, asked)
            session.on_unread = lambda i: unread.__setitem__(i, _read_unread(asked[i][2]))

    unread: dict[int, str | None] = {}  # index in `asked` -> read after the worker gave up

    texts: list[str | None] = []
    if use_worker:
        texts = _WORKER.demangle_batch([], meanwhile=run)
    else:
        run(None)
    if spill:  # a few names refused here, or no worker during the batch: one exchange
        asked += spill
        texts += _WORKER.demangle_batch([job[2] for job in spill])
    for k, ((symbol, dot, core), text) in enumerate(zip(asked, texts, strict=True)):
        if text is None:
            text = unread[k] if k in unread else _read_unread(core)
        done[symbol] = _finish(symbol, dot, text)
    for symbol, dot, core in blocks:
        done[symbol] = _finish(symbol, dot, _fallback(core))
    for symbol, indices in todo.items():
        result = done[symbol]
        _CACHE.put(symbol, result)
        for i in indices:
            out[i] = result
    return out


_Job = tuple[str, str, str]  # (symbol as given, leading dot, core to demangle)
# A batch of this many names starts the worker even if no name needs it, to share the work.
_BATCH_WORKER_MIN = 256
# Names handed to the worker at a time: its pipe starts moving before the batch is ready.
_CHUNK = 128


def _read_unread(core: str) -> str | None:
    """A name the worker did not read (or no worker): here if provably safe, else the package.

    Run as soon as the worker answers, this overlaps the `demangle` import (~40 ms, once)
    and its ~2 ms a name with the worker's remaining work.
    """
    safe = len(core) <= CXA_MAX_LEN and inprocess_safe(core)
    return (cxa_demangle(core) if safe else None) or _fallback(core)


def _hand_over(session: Session, jobs: list[_Job], asked: list[_Job]) -> None:
    """Ask the worker for ``jobs`` (emptying the list) and let the pipes move."""
    if jobs:
        asked.extend(jobs)
        session.ask([job[2] for job in jobs])
        del jobs[:]
    else:
        session.poll()


_fallback_style: Any = None


def _fallback(core: str) -> str | None:
    """Read ``core`` with the bounded pure-Python ``demangle`` package, GNU short spelling."""
    global _fallback_style
    try:
        import demangle as pydemangle

        if _fallback_style is None:
            # `expand_std_abbreviations=False` keeps `std::ostream`, as __cxa_demangle prints.
            _fallback_style = pydemangle.style("gnu", itanium={"expand_std_abbreviations": False})
        out = pydemangle.demangle(core, language=("itanium",), style=_fallback_style)
    except Exception:  # LimitExceeded and friends are caught inside; this is belt and braces
        return None
    if not isinstance(out, str) or out == core:
        return None
    return out


def _reset_state() -> None:
    """Clear the cache and restart the worker bookkeeping (for tests and benchmarks)."""
    _CACHE.clear()
    _WORKER.reset()
