"""IPython / Jupyter / Colab tracebacks: their frame lines and numbered source lines.

A notebook prints a traceback its own way (IPython's ``ultratb``), and notebooks are
where many model-serving crashes are first pasted from::

    ---------------------------------------------------------------------------
    OutOfMemoryError                          Traceback (most recent call last)
    Cell In[7], line 3
          1 prompt = "..."
    ----> 3 out = model.generate(**inputs)

    File /opt/conda/lib/python3.11/site-packages/transformers/generation/utils.py:2215, in G...
       2213     result = self._sample(input_ids)
    -> 2215 return result

    OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. ...

Frame lines, newest IPython first: ``Cell In[7], line 3`` (8.5+, with ``, in f(x)`` inside a
function a cell defined), ``Input In [7], in <cell line: 3>()`` (8.0-8.4), ``File
/path.py:2215, in Qual.name(args)`` (8.0+), and IPython 7 / older Colab's ``/path.py in
name(args)`` and ``<ipython-input-7-2b1f2e3c> in <module>()`` (no line number on the frame
line; it sits on the ``---->`` source line below).  Source lines are numbered, the current
one marked with an arrow: ``----> 3 code``, ``--> 116 code``, ``      1 code``.  Hidden frames
are elided as ``[... skipping hidden 1 frame]``.
"""

from __future__ import annotations

from diagnose.lazyre import lazy
from diagnose.model import Frame

__all__ = ["arrow_line", "is_frame_line", "is_source_line", "parse_ipython_frame"]

# Anchored, no nested quantifiers: every line of a big log may be tested.
_CELL = lazy(r"Cell In ?\[(\d+)\], line (\d+)(?:, in ([^\s(]+))?")
_INPUT = lazy(r"Input In ?\[(\d+)\], in (?:<cell line: (\d+)>|([^\s(]+))\(")
_FILE = lazy(r"File (\S[^,]*?):(\d+), in ([^\s(]+)(?:\(|$)")
# Databricks notebooks name a cell "<command-609584913430219>".
_DBX = lazy(r"File (<command-\d+>), line (\d+)(?:, in ([^\s(]+))?")
_OLD = lazy(r"(<ipython-input-[\w-]+>|[~/]\S*\.py) in ([^\s(]+)(?:\(|$)")
_SOURCE = lazy(r"(?:-+> ?|\s+)\d+(?: |$)|\s*\[\.\.\. skipping ")
_ARROW = lazy(r"-+> ?(\d+)(?: |$)")


def is_frame_line(s: str) -> bool:
    """Is the stripped line ``s`` an IPython frame line (any of the forms above)?"""
    first = s[:1]
    if first == "C":
        return s.startswith("Cell In") and _CELL.match(s) is not None
    if first == "I":
        return s.startswith("Input In") and _INPUT.match(s) is not None
    if first == "F":
        return s.startswith("File ") and (_FILE.match(s) or _DBX.match(s)) is not None
    if first in "</~":
        return " in " in s and _OLD.match(s) is not None
    return False


def is_source_line(text: str) -> bool:
    """Is ``text`` (as logged, indentation kept) a numbered source line or an elision?"""
    return _SOURCE.match(text) is not None


def arrow_line(text: str) -> int | None:
    """The line number on an arrow source line (``--> 522 code``), else None.

    IPython 7's frame lines carry no line number; the arrow below them does.
    """
    m = _ARROW.match(text) if text[:1] == "-" else None
    return int(m.group(1)) if m else None


def parse_ipython_frame(number: int, text: str) -> Frame | None:
    """The :class:`Frame` of an IPython frame line (stripped), or None for any other line.

    A cell is named as IPython names it (``Cell In[7]``, ``<ipython-input-7-2b1f>``); its
    top level is ``<module>``, as a plain traceback says.  Arguments are dropped: they are
    parameter names, not the types a C++ frame's parameters give.
    """
    first = text[:1]
    file: str | None = None
    line: str | None = None
    func: str | None = None
    if first == "C" and (m := _CELL.match(text)) is not None:
        file, line, func = f"Cell In[{m.group(1)}]", m.group(2), m.group(3) or "<module>"
    elif first == "I" and (m := _INPUT.match(text)) is not None:
        file, line, func = f"Input In [{m.group(1)}]", m.group(2), m.group(3) or "<module>"
    elif first == "F" and (m := _FILE.match(text)) is not None:
        file, line, func = m.groups()
    elif first == "F" and (m := _DBX.match(text)) is not None:
        file, line, func = m.group(1), m.group(2), m.group(3) or "<module>"
    elif first in "</~" and (m := _OLD.match(text)) is not None:
        file, func = m.groups()
    else:
        return None
    return Frame(
        log_line=number,
        dialect="python",
        symbol=func,
        function=func,
        file=file,
        line=int(line) if line else None,
    )
