"""Recover what a truncated or unreadable mangled name still says: ``read_mangled_prefix``.

Logs cut long CUTLASS kernel names mid-way and no demangler reads a cut name; this walks
the ``N<len><id>...`` nesting up to the cut for the namespace path, the function name and
the template arguments (tile shapes, dtypes), and never guesses a partial identifier.
"""

from __future__ import annotations

import re

from diagnose.frames.mangled_reader import PrefixReader
from diagnose.frames.mangled_shape import MAX_NAME, VERSION_RE
from diagnose.frames.mangled_spelling import (
    MAX_NODES,
    MAX_RENDER_STEPS,
    SPECIALS,
    End,
    Item,
    is_ctor_like,
    render,
    to_template_arg,
)
from diagnose.model import ParsedName


def read_mangled_prefix(symbol: str) -> ParsedName | None:
    """Recover what a truncated or unreadable mangled name still says, or ``None``.

    Walks the length-prefixed ``N<len><id>...`` nesting for the namespace path and the
    function name, and reads template arguments (types, ``Li128E`` integer literals,
    ``std::`` abbreviations, back-references) up to the cut.  A partially read identifier
    is dropped rather than guessed.  ``truncated`` is False only when the whole encoding,
    parameters included, was read to its end.  Never raises.
    """
    try:
        return _read_prefix(symbol)
    except Exception:  # never raises: an internal surprise means "nothing recovered"
        return None


def _read_prefix(symbol: object) -> ParsedName | None:
    if not isinstance(symbol, str):
        return None
    core = symbol[:MAX_NAME]  # past this, treat the name as cut: the walk is linear anyway
    core = VERSION_RE.sub("", core, count=1) if "@" in core else core
    core = core.lstrip(".")
    stripped = core.lstrip("_")
    if not stripped.startswith("Z") or not 1 <= len(core) - len(stripped) <= 4:
        return None
    body = stripped[1:]
    clone = re.search(r"\.[A-Za-z_]", body)
    if clone:
        body = body[: clone.start()]
    reader = PrefixReader(body)
    special = ""
    for code, words in SPECIALS.items():
        if body.startswith(code):
            special, reader.i = words, 2
            break
    top = Item()
    complete = False
    params: tuple[str, ...] | None = None
    return_type = ""
    try:
        if special and special != "guard variable for":
            reader.type(top)
        else:
            if reader.peek() == "L":
                reader.i += 1
            reader.name(top)
            if top.args is not None and top.closed:
                reader.tparams = top.args
        if reader.i < len(body) and not special:
            if top.args is not None and not is_ctor_like(top):
                ret = Item()
                reader.type(ret)
                return_type = render(ret, reader.budget)
            params = tuple(p for p in _read_params(reader) if p != "void")
        complete = reader.i >= len(body) and len(symbol) <= MAX_NAME
    except End:
        complete = False
    if not top.parts:
        return None
    scope = tuple(top.parts[:-1])
    name = top.parts[-1]
    qualified = "::".join(top.parts)
    # The tree and the text draw on budgets of the whole name too (see PrefixReader.budget);
    # the text gets its own, so a tree that spent the name's budget still leaves it spelt.
    nodes = [MAX_NODES]
    args = tuple(to_template_arg(a, nodes, reader.budget) for a in (top.args or ()))
    text = render(top, [MAX_RENDER_STEPS])
    if special:
        text = f"{special} {text}"
    if not complete:
        text += "..." if top.args is None or top.closed else ""
    return ParsedName(
        text=text,
        qualified=qualified,
        scope=scope,
        name=name,
        template_args=args,
        params=params if complete else None,
        return_type=return_type,
        special=special,
        truncated=not complete,
    )


def _read_params(reader: PrefixReader) -> list[str]:
    out: list[str] = []
    while reader.i < len(reader.s):
        param = Item()
        reader.type(param)
        out.append(render(param, reader.budget))
    return out
