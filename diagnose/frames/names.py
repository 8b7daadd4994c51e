"""Split a demangled C++ name into return type, scope, name, template-argument tree and parameters.

A demangled name is not a C++ program, so a grammar-based C++ parser reads it badly
(see ``shared/research/parsing.md``: tree-sitter-cpp got the qualified name right on about
half of real names).  This module instead matches brackets in one pass, building a tree of
bracket groups, and then reads the parts off that tree:

* the parameter list is the last top-level ``(...)`` that follows a name and is followed
  only by cv/ref qualifiers and clone suffixes;
* the name starts after the last top-level space before it (return types have spaces,
  names do not, except in the few places handled below);
* the name splits into components on top-level ``::``; each component keeps its own
  template arguments, which become a :class:`~diagnose.model.TemplateArg` tree.

Loggers cut long kernel names at a fixed width (``...<__nv_fp4_e2m1, __nv_bf...``), so a
trailing ``...``, brackets left open and a stray ``:`` all mark the result ``truncated``
and the surviving prefix is still parsed.  :func:`parse_name` never raises.
"""

from __future__ import annotations

from dataclasses import field
from functools import lru_cache

from diagnose.lazyre import lazy
from diagnose.model import ParsedName, TemplateArg
from diagnose.records import record

__all__ = ["parse_name"]

# Longer inputs are cut here (and flagged truncated): real names average ~400 chars and the
# longest CUTLASS kernels are ~20 kB; this keeps time and memory bounded on hostile text.
_MAX_INPUT = 32_768
# Template-argument trees deeper than this keep their text but not their children.
_MAX_TREE_DEPTH = 48

_OPERATOR_SYMBOLS = (
    r"\(\)|\[\]|<=>|<<=|>>=|->\*|->|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|%=|&=|"
    r"\|=|\^=|[-+*/%^&|~!=<>,]"
)
# One token per alternative; everything between tokens is plain word text and skipped.
_OTHER_TOKENS = (
    # MSVC quoted atoms: `anonymous namespace', `adjustor{12}', `vftable'.
    r"(?P<tick>`[^`'\n]*')"
    # LLVM spells local entities 'lambda'(int), 'lambda0'(), 'unnamed1'.
    r"|(?P<llvm>'(?:lambda|unnamed|block-literal)\d*')"
    r"|(?P<scope>::)"
    r"|(?P<arrow>->)"
    r"|(?P<ch>[<>()\[\]{},\s])"
)
_TOKEN = lazy(
    r"(?P<op>(?<![\w$])operator(?:\s*(?:" + _OPERATOR_SYMBOLS + r")(?:\s+(?=<))?"
    r"|\s+(?:new|delete)(?:\[\])?"
    r'|\s*""\s*\w+'
    r"|(?P<conv>\s+)))|" + _OTHER_TOKENS
)
# The same tokens for a name without "operator" (most of them), where the op alternative
# cannot match: a fifth of the pattern to compile.
_PLAIN_TOKEN = lazy(_OTHER_TOKENS)
_OPENERS = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}

_TRUNC_MARK = lazy(r"(?:\.\.\.|…)\s*$")
_SPECIAL = lazy(
    r"(?:vtable for|VTT for|construction vtable for|typeinfo name for|typeinfo fn for|"
    r"typeinfo for|guard variable for|non-virtual thunk to|virtual thunk to|"
    r"covariant return thunk to|TLS init function for|TLS wrapper function for|"
    r"reference temporary #\d+ for|transaction clone for|non-transaction clone for|"
    r"hidden alias for|java Class for)\s+"
)
# MSVC-ish leading storage/access words kept as qualifiers (Socorro drops them the same way).
_LEADING_WORDS = lazy(r"(?:static|virtual|public:|private:|protected:)\s+")
# What a match of each pattern above starts with (tests check them against the patterns):
# most names start with neither, and a startswith() spares compiling and running the regex.
_SPECIAL_HEADS = (
    "vtable", "VTT", "construction", "typeinfo", "guard", "non-", "virtual", "covariant",
    "TLS", "reference", "transaction", "hidden", "java",
)  # fmt: skip
_LEADING_HEADS = ("static", "virtual", "public:", "private:", "protected:")
_TRAILING_QUALIFIER = lazy(
    r"(?:(?<=[\s)])|^)(const|volatile|&&|&|noexcept|transaction_safe|throw\(\)|__restrict|restrict)"
    r"\s*$"
)
# GCC/Clang local-symbol suffixes that survive when a name is printed undemangled or glued:
# foo.isra.0, foo.constprop.3, foo.part.0, foo.cold, foo._omp_fn.1, foo.llvm.123.
_DOT_SUFFIX = lazy(
    r"(?:\.(?:isra|constprop|part|cold|hot|lto_priv|localalias|_omp_fn|clone|llvm|specialized)"
    r"(?:\.\d+)*)+$"
)
_ANON_NS = lazy(r"`anonymous[ -]namespace'")
_ARG_LEAD = lazy(r"(?:(?:const|volatile|struct|class|union|enum|typename)\s+|[&*]\s*)+")
_BUILTIN_MULTI = lazy(
    r"(?:(?:un)?signed\s+)?(?:long\s+long|long\s+double|short|long|char|int|__int128)"
    r"(?:\s+int)?(?![\w$])"
)
_ARG_NAME = lazy(
    r"(?:::)?"
    r"(?:\(anonymous namespace\)|`[^`']*'|'(?:lambda|unnamed)\d*'|\{[^{}]*\}|[A-Za-z_$][\w$]*)"
    r"(?:::(?:\(anonymous namespace\)|`[^`']*'|\{[^{}]*\}|~?[A-Za-z_$][\w$]*))*"
)
_LITERALS = frozenset({"true", "false", "nullptr", "sizeof", "decltype", "alignof", "noexcept"})
# What a match of _ARG_LEAD / _BUILTIN_MULTI starts with (tests check them): most arguments
# start with neither, which spares compiling and running those patterns.
_ARG_LEAD_HEADS = ("const", "volatile", "struct", "class", "union", "enum", "typename", "&", "*")
_BUILTIN_HEADS = ("unsigned", "signed", "long", "short", "char", "int", "__int128")


@record(frozen=False)
class _Group:
    """One bracket group: where it opens and closes, and what sits directly inside it."""

    kind: str
    opener: int
    end: int = -1
    closed: bool = False
    not_params: bool = False
    children: list[_Group] = field(default_factory=list)
    commas: list[int] = field(default_factory=list)
    spaces: list[int] = field(default_factory=list)
    scopes: list[int] = field(default_factory=list)
    # Spans of operator tokens (so a name may end with one) at this level.
    ops: list[tuple[int, int]] = field(default_factory=list)
    conv: bool = False
    pending_llvm: bool = False
    # The `(` right after a conversion operator's type: `operator char const*()`.
    after_conv: bool = False


def _build(s: str) -> tuple[_Group, bool]:
    """Match brackets in one pass; return the root group and whether any were left open."""
    root = _Group(kind="", opener=-1)
    stack: list[_Group] = [root]
    for m in (_TOKEN if "operator" in s else _PLAIN_TOKEN).finditer(s):
        top = stack[-1]
        kind = m.lastgroup
        pos = m.start()
        if kind == "op" or kind == "conv":
            top.ops.append((pos, m.end()))
            if m.group("conv") is not None:
                # `operator int*()`: the spaces that follow belong to the converted-to type.
                top.conv = True
            continue
        if kind == "llvm":
            top.pending_llvm = True
            continue
        if kind == "scope":
            top.scopes.append(pos)
            continue
        if kind in ("tick", "arrow"):
            continue
        c = m.group()
        if c == ",":
            top.commas.append(pos)
        elif c.isspace():
            if not top.conv:
                top.spaces.append(pos)
        elif c in _OPENERS:
            after_op = bool(top.ops) and s[top.ops[-1][1] : pos].strip() == ""
            if c == "<" and not after_op and not _opens_template(s, pos, top.kind):
                continue
            group = _Group(kind=c, opener=pos)
            if c == "(" and (top.pending_llvm or top.conv):
                # 'lambda'(int) is part of the name; in `operator T()` the paren ends the type.
                group.not_params = top.pending_llvm
                group.after_conv = top.conv
                top.pending_llvm = False
                top.conv = False
            top.children.append(group)
            stack.append(group)
        else:
            want = _CLOSERS[c]
            if top.kind == want:
                top.end, top.closed = pos, True
                stack.pop()
            elif c == ">":
                # A `>` that closes nothing is a comparison inside a parenthesised expression.
                continue
            elif any(g.kind == want for g in stack[1:]):
                # Recover from a `<` that was really a comparison: close through to the match.
                while len(stack) > 1:
                    g = stack.pop()
                    g.end = pos
                    g.closed = g.kind == want
                    if g.closed:
                        break
    left_open = len(stack) > 1
    for g in stack[1:]:
        g.end = len(s)
    return root, left_open


def _opens_template(s: str, pos: int, enclosing: str) -> bool:
    """Whether the ``<`` at ``pos`` opens template arguments rather than comparing."""
    j = pos - 1
    while j >= 0 and s[j] == " ":
        j -= 1
    if j < 0:
        return True
    prev = s[j]
    if prev == ")":
        # GNU parenthesises expression operands, `(1)<(2)`: a template-id never follows `)`.
        return False
    # Inside parentheses a spaced `a < b` is a comparison; GNU writes `f(std::vector<int>)`.
    return not (enclosing == "(" and j != pos - 1)


def _ends_with_op(group: _Group, end: int) -> bool:
    """Whether an operator token ends exactly at ``end`` in ``group``."""
    return any(e == end for _, e in group.ops)


def _strip_trailing(s: str, root: _Group, end: int) -> tuple[int, list[str], list[str]]:
    """Peel qualifiers and clone suffixes off the end of the top level.

    Returns the new end and the qualifiers and clones found (in written order).
    """
    quals: list[str] = []
    clones: list[str] = []
    children = root.children
    ci = len(children) - 1
    while True:
        while end > 0 and s[end - 1].isspace():
            end -= 1
        while ci >= 0 and children[ci].opener >= end:
            ci -= 1
        last = children[ci] if ci >= 0 else None
        if last is not None and last.closed and last.end == end - 1:
            inner = s[last.opener + 1 : last.end]
            if last.kind == "[" and inner.startswith("clone "):
                clones.insert(0, inner[6:].strip())  # [clone .isra.0] [clone .cold]
                end = last.opener
                continue
            if last.kind == "[" and inner.startswith("with "):
                end = last.opener  # GCC's `[with T = int]` explains, it does not name
                continue
            if (
                last.kind == "("
                and inner.startswith(".")
                and last.opener > 0
                and s[last.opener - 1] in " )"
            ):
                clones.insert(0, inner)  # LLVM spells clone suffixes `(.isra.0.cold)`
                end = last.opener
                continue
        m = _TRAILING_QUALIFIER.search(s, 0, end)
        if (
            m is not None
            and (last is None or m.start() > last.end)
            and m.start() > 0
            and not _ends_with_op(root, m.end(1))
        ):
            quals.insert(0, m.group(1))
            end = m.start()
            continue
        return end, quals, clones


def _find_params(s: str, root: _Group, end: int, truncated: bool) -> _Group | None:
    """The top-level parameter group ending the core text, if there is one."""
    for g in reversed(root.children):
        if g.opener >= end:
            continue
        if g.kind != "(":
            return None
        closes_here = (g.closed and g.end == end - 1) or (not g.closed and truncated)
        if not closes_here or g.not_params or g.opener == 0:
            return None
        inner = s[g.opener + 1 : g.end]
        # LLVM clone suffixes `(.cold)` are not parameters; C varargs `(...)` are (and
        # TensorRT-LLM prints `throwRuntimeError(...)`).
        if inner == "anonymous namespace" or (inner.startswith(".") and inner != "..."):
            return None
        j = g.opener - 1
        if s[j] == " " and j > 0 and s[j - 1] == "'":
            j -= 1  # MSVC: QueryInterface`adjustor{12}' (_GUID const&, void**)
        prev = s[j]
        if prev.isalnum() or prev in "_$>]'}" or g.after_conv or _ends_with_op(root, g.opener):
            return g
        return None
    return None


def _name_start(s: str, root: _Group, start: int, name_end: int) -> int:
    """Where the name begins: after the last top-level space that is not inside the name."""
    for sp in reversed(root.spaces):
        if sp >= name_end or sp < start:
            continue
        rest = s[sp + 1 : sp + 12]
        if rest.startswith(("const::", "volatile::", "&::", "&&::")):
            continue  # local entity: f(int) const::{lambda()#1}
        if sp + 1 >= name_end:
            continue
        return sp + 1
    return start


def _groups_in(group: _Group, lo: int, hi: int) -> list[_Group]:
    """Direct children of ``group`` that open within ``[lo, hi)``."""
    return [g for g in group.children if lo <= g.opener < hi]


def _splice_out(s: str, lo: int, hi: int, drop: list[_Group]) -> str:
    """The text of ``[lo, hi)`` without the given child groups."""
    parts: list[str] = []
    pos = lo
    for g in drop:
        parts.append(s[pos : g.opener])
        pos = min(hi, g.end + 1)
    parts.append(s[pos:hi])
    return "".join(parts).strip()


class _Reader:
    """Reads components and template arguments off one bracket tree."""

    def __init__(self, s: str, truncated: bool) -> None:
        self.s = s
        self.truncated = truncated
        self.n = len(s)

    def args_of(self, g: _Group, depth: int) -> tuple[TemplateArg, ...]:
        """Split a ``<...>`` group on its commas into a tuple of arguments."""
        s = self.s
        bounds = [g.opener + 1, *[c + 1 for c in g.commas]]
        ends = [*g.commas, g.end]
        out: list[TemplateArg] = []
        for i, (lo, hi) in enumerate(zip(bounds, ends, strict=True)):
            if not s[lo:hi].strip():
                if i == len(bounds) - 1 and g.closed and not out and not g.commas:
                    break  # `f<>`: no arguments at all
                if not g.closed and i == len(bounds) - 1:
                    break  # cut right after a comma: nothing survived of this argument
            cut = not g.closed and i == len(bounds) - 1
            out.append(self.arg(g, lo, hi, depth, cut))
        return tuple(out)

    def arg(self, g: _Group, lo: int, hi: int, depth: int, cut: bool) -> TemplateArg:
        """One template argument: text, top-level qualified name, nested arguments."""
        text = self.s[lo:hi].strip()
        inner = _groups_in(g, lo, hi)
        angle = [c for c in inner if c.kind == "<"]
        plain = _splice_out(self.s, lo, hi, [c for c in inner if c.kind in "<["])
        name = _arg_name(plain)
        nested: tuple[TemplateArg, ...] = ()
        if name is not None and angle and depth < _MAX_TREE_DEPTH:
            # Arguments of the last templated component that is part of the name itself.
            name_end = _name_extent(self.s, lo, hi, inner)
            own = [c for c in angle if c.opener < name_end]
            if own:
                nested = self.args_of(own[-1], depth + 1)
        return TemplateArg(text=text, name=name, args=nested, truncated=cut)


def _name_extent(s: str, lo: int, hi: int, inner: list[_Group]) -> int:
    """End of the leading qualified name of an argument (before a space or paren)."""
    skip = {c.opener: c.end for c in inner if c.kind in "<["}
    i = lo
    while i < hi and s[i] in " &*":
        i += 1
    started = False
    while i < hi:
        if i in skip:
            i = skip[i] + 1
            continue
        ch = s[i]
        if ch == " " and started:
            word = s[i + 1 : i + 10]
            if not word.startswith(("const", "volatile", "&", "*")):
                return i
        elif ch == "(" and started:
            return i
        elif not ch.isspace():
            started = True
        i += 1
    return hi


def _arg_name(plain: str) -> str | None:
    """The qualified name written at the top level of an argument, without its brackets."""
    if not plain or plain[0] in "(-0123456789'\"":
        return None  # a cast `(T)1`, a number, a character literal
    lead = _ARG_LEAD.match(plain) if plain.startswith(_ARG_LEAD_HEADS) else None
    rest = plain[lead.end() :] if lead else plain
    b = _BUILTIN_MULTI.match(rest) if rest.startswith(_BUILTIN_HEADS) else None
    if b is not None:
        return " ".join(b.group().split())
    m = _ARG_NAME.match(rest)
    if m is None:
        return None
    name = m.group()
    if "`anonymous" in name:
        name = _ANON_NS.sub("(anonymous namespace)", name)
    return None if name in _LITERALS else name


def _droppable(s: str, groups: list[_Group]) -> list[_Group]:
    """Template-argument and ABI-tag groups among ``groups`` and inside their other groups.

    A local entity's scope keeps its parameter list (``f(c10::ArrayRef<long>)::op``) but,
    like every component, loses its template arguments: ``f(c10::ArrayRef)::op``.
    """
    out: list[_Group] = []
    todo = list(reversed(groups))
    while todo:
        g = todo.pop()
        # An unclosed `[` in a name is an ABI tag the logger cut: `table[ab...`.
        if g.kind == "<" or (
            g.kind == "[" and (not g.closed or s.startswith("abi:", g.opener + 1))
        ):
            out.append(g)
        else:
            todo.extend(reversed(g.children))
    return out


def _components(s: str, root: _Group, lo: int, hi: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` on top-level ``::`` into component spans."""
    spans: list[tuple[int, int]] = []
    pos = lo
    for sc in root.scopes:
        if lo <= sc < hi:
            spans.append((pos, sc))
            pos = sc + 2
    spans.append((pos, hi))
    return [(a, b) for a, b in spans if s[a:b].strip()]


def _parse(text: str) -> ParsedName:
    """Do the work of :func:`parse_name` (may raise on a bug; the caller guards)."""
    truncated = False
    s = text.strip()
    if len(s) > _MAX_INPUT:
        s, truncated = s[:_MAX_INPUT], True
    m = _TRUNC_MARK.search(s)
    if m is not None:
        s, truncated = s[: m.start()].rstrip(), True
    # A cut between the two colons of `::` (or right after them) leaves a stray `:`.
    if s.endswith(":"):
        s, truncated = s.rstrip(":").rstrip(), True

    specials: list[str] = []
    quals_lead: list[str] = []
    while True:
        sm = _SPECIAL.match(s) if s.startswith(_SPECIAL_HEADS) else None
        if sm is not None:
            specials.append(sm.group().strip())
            s = s[sm.end() :]
            continue
        if s.startswith("[thunk]:"):
            specials.append("[thunk]")  # MSVC adjustor thunks
            s = s[8:]
            continue
        lm = _LEADING_WORDS.match(s) if s.startswith(_LEADING_HEADS) else None
        if lm is not None:
            quals_lead.append(lm.group().strip())
            s = s[lm.end() :]
            continue
        break

    root, left_open = _build(s)
    truncated = truncated or left_open
    end, quals, clones = _strip_trailing(s, root, len(s))
    params_group = _find_params(s, root, end, truncated)
    name_end = params_group.opener if params_group is not None else end
    while name_end > 0 and s[name_end - 1].isspace():
        name_end -= 1
    # `typeinfo for bool (*)(int)` names a type, not a function: all of it is the name.
    start = 0 if specials and params_group is None else _name_start(s, root, 0, name_end)
    return_type = s[:start].strip()

    reader = _Reader(s, truncated)
    abi_tags: list[str] = []
    bases: list[str] = []
    template_args: tuple[TemplateArg, ...] = ()
    for lo, hi in _components(s, root, start, name_end):
        inner = _groups_in(root, lo, hi)
        for g in inner:
            body = s[g.opener + 1 : g.end]
            if g.kind == "[" and body.startswith("abi:"):
                abi_tags.append(body[4:])
        drop = _droppable(s, inner)
        base = _ANON_NS.sub("(anonymous namespace)", _splice_out(s, lo, hi, drop))
        bases.append(base)
        angle = [g for g in inner if g.kind == "<"]
        if angle:
            template_args = reader.args_of(angle[-1], 0)
    if bases:
        dm = _DOT_SUFFIX.search(bases[-1])
        if dm is not None and dm.start() > 0:
            clones.append(dm.group())
            bases[-1] = bases[-1][: dm.start()]

    params: tuple[str, ...] | None = None
    if params_group is not None:
        body = s[params_group.opener + 1 : params_group.end]
        cuts = [params_group.opener + 1, *[c + 1 for c in params_group.commas]]
        stops = [*params_group.commas, params_group.end]
        items = [s[a:b].strip() for a, b in zip(cuts, stops, strict=True)]
        if not body.strip():
            items = []
        elif not params_group.closed and items and not items[-1]:
            items.pop()
        params = tuple(items)

    return ParsedName(
        text=text,
        qualified="::".join(bases),
        scope=tuple(bases[:-1]),
        name=bases[-1] if bases else "",
        template_args=template_args,
        params=params,
        return_type=return_type,
        qualifiers=(*quals_lead, *quals),
        abi_tags=tuple(abi_tags),
        clones=tuple(clones),
        special=" ".join(specials),
        truncated=truncated,
    )


@lru_cache(maxsize=8192)
def _parse_cached(text: str) -> ParsedName:
    """Memoised, guarded parse: backtraces repeat the same frames across ranks."""
    try:
        return _parse(text)
    except Exception:  # the contract is "never raises"; a bug must not cost the diagnosis
        return ParsedName(text=text, qualified=text.strip(), name=text.strip())


def parse_name(text: str) -> ParsedName:
    """Parse a demangled C++ name (GNU, LLVM or MSVC-ish spelling) into a :class:`ParsedName`.

    Handles return types, ``(anonymous namespace)``, lambdas and unnamed types,
    operators (``operator< <int>``, ``operator()``, conversions), ABI tags, clone
    suffixes, trailing qualifiers, ``vtable for``-style prefixes and names a logger cut
    short (``...``, open brackets, a stray ``:``), which set ``truncated``.  Never raises;
    results are cached in a bounded LRU.
    """
    if not isinstance(text, str):
        text = str(text)  # type: ignore[unreachable]  # untyped callers may pass bytes
    return _parse_cached(text)
