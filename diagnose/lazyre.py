"""Module-level regular expressions compiled on first use, so importing a module stays cheap.

``re.compile`` parses and compiles in Python (~50-300 us a pattern); the parser
modules hold ~170 patterns, and a small log exercises only a few dozen of them
(most sit behind literal pre-checks), so compiling them all at import was a
large share of a CLI run.  ``lazy(r"...")`` returns a :class:`LazyPattern`
with the same methods as ``re.Pattern[str]``; the first call compiles (through
``re``'s own cache), later calls pay one Python call (~75 ns, lost in the noise
of normalize + find_regions + extract_context over a 3 MB server log).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LazyPattern", "LazyRE2", "lazy"]

_Repl = str | Callable[[re.Match[str]], str]


class LazyPattern:
    """A ``str`` regular expression compiled the first time it is used."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        """Remember ``pattern`` and ``flags``; nothing is compiled yet."""
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now if this is the first use)."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    @property
    def groupindex(self) -> dict[str, int]:
        """Named groups, as :attr:`re.Pattern.groupindex`."""
        return dict(self.compiled.groupindex)

    @property
    def groups(self) -> int:
        """Number of capturing groups, as :attr:`re.Pattern.groups`."""
        return self.compiled.groups

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        """:meth:`re.Pattern.search`."""
        return (self._compiled or self.compiled).search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        """:meth:`re.Pattern.match`."""
        return (self._compiled or self.compiled).match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        """:meth:`re.Pattern.fullmatch`."""
        return (self._compiled or self.compiled).fullmatch(string, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        """:meth:`re.Pattern.finditer`."""
        return (self._compiled or self.compiled).finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        """:meth:`re.Pattern.findall`."""
        return (self._compiled or self.compiled).findall(string, pos, endpos)

    def sub(self, repl: _Repl, string: str, count: int = 0) -> str:
        """:meth:`re.Pattern.sub`."""
        return (self._compiled or self.compiled).sub(repl, string, count)

    def subn(self, repl: _Repl, string: str, count: int = 0) -> tuple[str, int]:
        """:meth:`re.Pattern.subn`."""
        return (self._compiled or self.compiled).subn(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        """:meth:`re.Pattern.split`."""
        return (self._compiled or self.compiled).split(string, maxsplit)

    def __repr__(self) -> str:
        """``lazy('...')``, so tables of patterns stay readable in a debugger."""
        return (
            f"lazy({self.pattern!r})" if not self.flags else f"lazy({self.pattern!r}, {self.flags})"
        )


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    """Return a pattern that compiles on first use (see the module docstring)."""
    return LazyPattern(pattern, flags)


class LazyRE2:
    """An RE2 pattern (google-re2) compiled the first time it is used.

    RE2 compiles in C++ but still costs ~0.1 ms a pattern, and the rule base holds
    hundreds; the shared literal prefilter means most rules never run on a given
    log, so their patterns need never be compiled.  ``options`` holds the values of
    ``re2.Options.NAMES`` in order (``encoding`` as its integer value).
    """

    __slots__ = ("_compiled", "option_values", "pattern")

    def __init__(self, pattern: str, option_values: tuple[Any, ...], compiled: Any = None) -> None:
        """Remember the pattern and options; ``compiled`` may be passed when already built."""
        self.pattern = pattern
        self.option_values = option_values
        self._compiled = compiled

    @classmethod
    def wrap(cls, compiled: Any) -> LazyRE2:
        """Wrap an already compiled ``re2`` pattern (its options are recorded for a snapshot)."""
        import re2

        options = compiled.options
        values = tuple(_plain(getattr(options, name)) for name in re2.Options.NAMES)
        return cls(compiled.pattern, values, compiled)

    @property
    def compiled(self) -> Any:
        """The compiled ``re2`` pattern (compiled now if this is the first use)."""
        if self._compiled is None:
            import re2

            options = re2.Options()
            for name, value in zip(re2.Options.NAMES, self.option_values, strict=True):
                if name == "encoding":
                    value = type(options.encoding)(value)
                setattr(options, name, value)
            self._compiled = re2.compile(self.pattern, options=options)
        return self._compiled

    @property
    def groupindex(self) -> dict[str, int]:
        """Named groups of the pattern."""
        return dict(self.compiled.groupindex)

    def search(self, text: str, pos: int | None = None, endpos: int | None = None) -> Any:
        """``re2`` ``search``: a match object or ``None``."""
        compiled = self._compiled if self._compiled is not None else self.compiled
        return compiled.search(text, pos, endpos)

    def __repr__(self) -> str:
        """``LazyRE2('...')``."""
        return f"LazyRE2({self.pattern!r})"


def _plain(value: Any) -> Any:
    """RE2 option values are bools and ints, except ``encoding`` (an enum: keep its int)."""
    return value if isinstance(value, (bool, int)) else int(value)
