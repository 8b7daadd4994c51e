"""Demangle Itanium C++ symbols the way C++ loggers print them, without trusting the input.

``demangle`` returns the ``abi::__cxa_demangle`` spelling (what TensorRT-LLM's
``TllmException::getTrace()`` and PyTorch's ``c10::demangle`` print), so frames we
demangle compare equal to frames a logger already demangled.  ``demangle_many`` does the
same for a whole list (a log region's frames): this process and the worker read it side
by side, from its two ends (see ``_Batch``).  This module is the public API, the result
cache and the choice of tier:

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

import contextlib
import re
from bisect import bisect_left
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

from diagnose.frames.bounded_lru import BoundedLRU
from diagnose.frames.cxa import CXA_MAX_LEN, cxa_demangle, cxa_demangle_each
from diagnose.frames.cxa import loaded as cxa_loaded
from diagnose.frames.demangle_worker import WORKER as _WORKER
from diagnose.frames.mangled_bound import (
    INPROC_BUDGET_BITS,
    inprocess_safe,
    output_bound_bits,
    quick_split,
)
from diagnose.frames.mangled_prefix import read_mangled_prefix
from diagnose.frames.mangled_shape import (
    MAX_NAME,
    MAX_OUTPUT,
    bare,
    is_mangled,
    prepare,
    worth_reading,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from diagnose.frames.demangle_session import Session

__all__ = ["demangle", "demangle_in_text", "demangle_many", "is_mangled", "read_mangled_prefix"]

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
    # Over CXA_MAX_LEN __cxa_demangle refuses anyway: skip proving the bound (~0.5 ms).
    text = cxa_demangle(core) if len(core) <= CXA_MAX_LEN and inprocess_safe(core) else None
    if text is None:
        # Too big to prove safe here, or refused here: the worker reads both kinds (the
        # second through libiberty without its length guard).
        text = _WORKER.demangle(core)
    if text is None:
        text = _fallback(core)
    return text


def _demangle_many(symbols: list[str]) -> list[str]:
    """The batch path: one cache look-up, then every distinct uncached name read once."""
    all_bare = bare(symbols)
    if all_bare:  # every item a name `worth_reading` takes, and its own core
        wanted = symbols
    else:  # worth_reading, inlined: this sees every name
        wanted = [
            s for s in symbols if isinstance(s, str) and 3 <= len(s) <= MAX_NAME and "Z" in s[:6]
        ]
    # An empty cache (a first batch) has nothing to look up.
    done = _CACHE.get_many(wanted) if len(_CACHE) else {}
    distinct = dict.fromkeys(wanted)
    todo = [s for s in distinct if s not in done] if done else list(distinct)
    if todo:
        new = _read_symbols(todo, all_bare)
        if done:
            done.update(new)
        else:
            done = new
    if len(wanted) == len(symbols):  # every item a string: one C-level pass
        return list(map(done.get, symbols, symbols))
    return [done.get(s, s) if isinstance(s, str) else s for s in symbols]


def _read_symbols(todo: list[str], all_bare: bool = False) -> dict[str, str]:
    """Strip decorations, read every distinct core, put the decorations back; cache it all.

    ``all_bare``: the caller found the names ``bare`` already.
    """
    new: dict[str, str] = {}
    jobs: list[_Job] = []  # decorated names: (symbol, leading dot, core)
    blocks: list[_Job] = []  # Apple blocks: the `demangle` package's
    if len(todo) >= _BATCH_WORKER_MIN or max(map(len, todo)) > CXA_MAX_LEN:
        _WORKER.prestart()  # the worker will be needed: let it come up meanwhile
    if all_bare or bare(todo):
        plain = todo  # the usual batch: every name is its own core, no `prepare` needed
    else:
        plain = []
        for symbol in todo:
            prepared = prepare(symbol)
            if prepared is None:
                new[symbol] = symbol
            elif prepared[2]:
                blocks.append((symbol, prepared[0], prepared[1]))
            elif prepared[0] or prepared[1] != symbol:
                jobs.append((symbol, prepared[0], prepared[1]))
            else:
                plain.append(symbol)
    cores = list(dict.fromkeys([*plain, *(job[2] for job in jobs)])) if jobs else plain
    texts, unreadable = _read_cores(cores)
    values = texts.values()
    if plain is todo and max(map(len, filter(None, values)), default=0) <= MAX_OUTPUT:
        # The usual batch: every name its own core, none too long; no copy of a big dict.
        for core in unreadable:
            texts[core] = core  # given back as written
        new = cast("dict[str, str]", texts)
    else:
        new.update({s: s if (t := texts[s]) is None or len(t) > MAX_OUTPUT else t for s in plain})
    for symbol, dot, core in jobs:
        new[symbol] = _finish(symbol, dot, texts[core])
    for symbol, dot, core in blocks:
        new[symbol] = _finish(symbol, dot, _fallback(core))
    _CACHE.put_many(new)
    return new


_Job = tuple[str, str, str]  # (symbol as given, leading dot, core to demangle)
# A batch of this many names starts the worker even if no name needs it, to share the work.
_BATCH_WORKER_MIN = 256
# This process reads this many names between looks at the worker's pipes (~110 us of work).
_BLOCK = 32
# The worker is handed _CHUNK more bytes of names whenever less than that is unanswered.
# c++filt reads ~60 bytes a microsecond, so 16 KB is ~0.3 ms of its work: more than this
# process's _BLOCK takes, so it does not run dry between two looks, and at the end this
# process waits for it about that long.  A big batch hands over 1/_CHUNK_SHARE of its
# bytes at a time, up to _MAX_CHUNK (~4 ms): a 472k-name batch spent ~0.4 s of this
# process handing the worker 16 KB at a time; waiting up to ~4 ms at its end is nothing.
_CHUNK = 16_384
_MAX_CHUNK = 262_144
_CHUNK_SHARE = 256
# Bytes the worker is handed before this process imports the `demangle` package (~15 ms;
# the pipe holds ~10 ms of answers) or ctypes (~3 ms), once per process.
_IMPORT_CHUNK = 1 << 20
_LOAD_CHUNK = 196_608
_ALL = 1 << 62


def _read_cores(cores: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """Each core's ``__cxa_demangle`` spelling (``None``: unread), every tier side by side,
    and the cores no tier read (found without a pass over a big batch's results).

    ``cores`` are distinct words of ``WORD_BYTES``.
    """
    batch = _Batch(cores)
    use_worker = _WORKER.usable and (
        len(cores) >= _BATCH_WORKER_MIN or any(len(core) > CXA_MAX_LEN for core in cores)
    )
    if use_worker:
        batch.collect(_WORKER.demangle_batch([], meanwhile=batch.run))
    else:
        batch.run(None)
    texts = batch.texts
    if len(texts) == len(cores):  # every core settled (texts holds no other keys)
        return texts, batch.unreadable
    if use_worker and len(texts) + len(batch.pending) == len(cores):
        missing = batch.pending  # every other core was read
    else:
        missing = [core for core in cores if core not in texts]
    if not use_worker:  # a few names refused here: one exchange with the worker
        answers = _WORKER.demangle_batch(missing)
        texts.update((c, t) for c, t in zip(missing, answers, strict=True) if t is not None)
    for core in missing:
        if core not in texts:
            texts[core] = text = _read_unread(core, batch.tried)
            if text is None:
                batch.unreadable.append(core)
    return texts, batch.unreadable


class _Batch:
    """One batch's cores: which side reads which, and what has been read so far.

    With GNU c++filt as the worker it takes names from the front of the batch, ~0.3 ms of
    its work at a time whenever it runs low (up to ~4 ms in a big batch), while this process
    reads names from the back until the two meet: both cores stay busy and both sides finish
    together, whatever else the machine runs.  Here a name costs ~3.4 us when the quick
    bound proves it small (:func:`diagnose.frames.mangled_bound.quick_safe`).  The names it
    meets and will not read wait in ``deferred``, first in line for the worker: names over
    1,024 characters (``__cxa_demangle`` refuses them, gcc PR 87675) and names the quick
    bound cannot prove (the exact bound costs ~15 us and proves fewer than half of them;
    c++filt reads one in ~7 us).  A name ``__cxa_demangle`` refused goes to the worker at
    once: if the worker cannot read it either, the slow fallback is needed, and with only
    ~0.3 ms of work queued ahead of it the answer comes back early enough for the fallback
    to overlap with the worker's remaining work.  The Python worker is slower than this
    process on every name, so then this process reads every name it can, with the exact
    bound too, and the worker gets only the rest, at once.

    Every core is a word of ``WORD_BYTES`` (``bare`` checked the batch, or ``prepare``
    matched each one), so what the worker is handed is not checked again.
    """

    def __init__(self, cores: list[str]) -> None:
        self.texts: dict[str, str | None] = {}  # settled: a spelling, or None (unreadable)
        self.order = cores
        self.lo = self.hi = 0  # the worker's next index, this process's end
        self.asked: list[str] = []  # cores in the order the worker answers them
        self.tried: set[str] = set()  # refused by __cxa_demangle here: no second try here
        self.deferred: list[str] = []  # passed over here, waiting for the worker
        self.rescued: dict[str, str | None] = {}  # read after the worker gave them back
        self.unreadable: list[str] = []  # settled as None: no tier reads them
        self.pending: list[str] = []  # the worker gave them back, nothing here read them yet
        self.share = False
        self.ends: list[int] = []  # ends[i]: bytes of order[:i], newlines included
        self.chunk = _CHUNK

    def run(self, session: Session | None) -> None:
        """Read the batch (``meanwhile`` of :meth:`Worker.demangle_batch`)."""
        self.hi = len(self.order)
        if session is None:
            self._here(0, self.hi, exact=True)  # what is left over is the caller's
            return
        self.share = _WORKER.native
        lengths = list(map(len, self.order))
        self.ends = list(map(int.__add__, accumulate(lengths, initial=0), range(self.hi + 1)))
        self.chunk = min(max(_CHUNK, self.ends[-1] // _CHUNK_SHARE), _MAX_CHUNK)
        if self.share and not cxa_loaded():
            # Binding __cxa_demangle imports ctypes first (~3 ms, once per process).
            self._give(session, _LOAD_CHUNK)
        while self.lo < self.hi:
            session.poll()  # also keeps both pipes moving while this process is busy
            if session.unread:
                self._unread(session)
            if self.share and not _WORKER.usable:
                self.share = False  # out of strikes: read here what can be read here
            if self.share and session.backlog < self.chunk:
                self._give(session, self.chunk)
            stop = max(self.lo, self.hi - _BLOCK)
            refused = self._here(stop, self.hi, exact=not self.share)
            self.hi = stop
            if not self.share:
                refused += self.deferred
                del self.deferred[:]
            self._ask(session, refused)
        self._give(session, _ALL)  # what was passed over here and is still waiting

    def collect(self, results: list[str | None]) -> None:
        """Take the worker's answers (in the order asked)."""
        texts = self.texts
        asked, rescued = self.asked, self.rescued
        texts.update(zip(asked, results, strict=True))
        # Unanswered names were mostly read since (`rescued`); the rest (one a worker died
        # on, ones given back after this process stopped reading) are `pending`, found by
        # list.index, a C loop: a Python pass over a 472k-name batch cost ~0.1 s.
        if results.count(None) > len(rescued):
            i = -1
            with contextlib.suppress(ValueError):
                while True:
                    i = results.index(None, i + 1)
                    if asked[i] not in rescued:
                        texts.pop(asked[i], None)
                        self.pending.append(asked[i])
        texts.update(rescued)

    def _here(self, start: int, stop: int, exact: bool) -> list[str]:
        """Read ``order[start:stop]`` here; return the cores ``__cxa_demangle`` refused.

        The long ones and the ones not proven small (by the quick bound, or also by the
        exact one when ``exact``) are left in ``deferred``.
        """
        proven, rest = quick_split(self.order[start:stop], CXA_MAX_LEN)
        if exact:
            for core in rest:
                if len(core) <= CXA_MAX_LEN and output_bound_bits(core) <= INPROC_BUDGET_BITS:
                    proven.append(core)
                else:
                    self.deferred.append(core)
        else:
            self.deferred += rest
        results = cxa_demangle_each(proven)
        texts = self.texts
        texts.update(zip(proven, results, strict=True))
        if None not in results:
            return []
        refused = [core for core, text in zip(proven, results, strict=True) if text is None]
        for core in refused:
            del texts[core]
        self.tried.update(refused)
        return refused

    def _ask(self, session: Session, words: list[str]) -> None:
        if words:
            self.asked += words
            session.ask_words(words)

    def _give(self, session: Session, size: int) -> None:
        """Hand the worker the next names in line, about ``size`` bytes of them.

        The names passed over here come first, then the batch from the front.
        """
        deferred, order = self.deferred, self.order
        taken = 0
        while taken < len(deferred) and size > 0:  # few: what this process passed over
            size -= len(deferred[taken]) + 1
            taken += 1
        words = deferred[:taken]
        del deferred[:taken]
        lo, hi = self.lo, self.hi
        stop = lo
        if size > 0 and lo < hi:  # the fewest names from lo that make up `size` bytes
            ends = self.ends
            stop = min(bisect_left(ends, ends[lo] + size, lo + 1, hi + 1), hi)
        words += order[lo:stop]
        self.lo = stop
        self._ask(session, words)

    def _unread(self, session: Session) -> None:
        """Names the worker could not read: read them another way while it works on.

        The fallback is slow (~0.5 ms a name; ~15 ms to import, once per process), so
        the worker is fed and its answers read between two names, and before the import
        it gets ~1 MiB more work.  Its 1 MiB output pipe holds ~10 ms of answers, so the
        import is done in steps with a look at the pipes between them.  (A thread reading
        the pipe during the import measured no faster and cost CPU.)
        """
        indices = session.unread[:]
        del session.unread[:]
        if self.share and _fallback_style is None:
            self._give(session, _IMPORT_CHUNK)
        if _fallback_style is None:
            _load_fallback(session.poll)
        for i in indices:
            core = self.asked[i]
            self.texts[core] = self.rescued[core] = text = _read_unread(core, self.tried)
            if text is None:
                self.unreadable.append(core)
            # Between two names (~0.5 ms each) keep the worker fed and its answers read:
            # left alone for a few hundred of them it stopped on a full pipe.
            session.poll()
            if self.share and session.backlog < self.chunk:
                self._give(session, self.chunk)


def _read_unread(core: str, tried: set[str] | frozenset[str] = frozenset()) -> str | None:
    """A name the worker did not read (or no worker): here if provably safe, else the package."""
    if core not in tried and len(core) <= CXA_MAX_LEN and inprocess_safe(core):
        text = cxa_demangle(core)
        if text is not None:
            return text
    return _fallback(core)


_fallback_style: Any = None


def _load_fallback(between: Callable[[], None] = lambda: None) -> None:
    """Import the ``demangle`` package and build its style, calling ``between`` in between.

    ~15 ms in three steps of ~5 ms (the package, its Itanium scheme, the style), so a
    caller can keep the worker's pipes moving.  Failures are left to :func:`_fallback`.
    """
    global _fallback_style
    try:
        import demangle as pydemangle

        between()
        import demangle.schemes.itanium  # what style() would import, as a step of its own

        between()
        # `expand_std_abbreviations=False` keeps `std::ostream`, as __cxa_demangle prints.
        _fallback_style = pydemangle.style("gnu", itanium={"expand_std_abbreviations": False})
        between()
    except Exception:  # no package, or a surprise in it: _fallback returns None
        return


def _fallback(core: str) -> str | None:
    """Read ``core`` with the bounded pure-Python ``demangle`` package, GNU short spelling."""
    try:
        import demangle as pydemangle

        if _fallback_style is None:
            _load_fallback()
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
