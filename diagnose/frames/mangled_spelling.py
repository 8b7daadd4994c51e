"""How the parts of an Itanium mangled name are spelled, for the truncated-prefix reader.

The ABI's code tables (builtin types, operators, ``std::`` abbreviations), the caps that
keep a hostile name's rendering small, and :class:`Item`: a name or type being read,
linked into its parent before it is complete, and rendered as ``__cxa_demangle`` would
spell it, with ``...`` where the input was cut.
"""

from __future__ import annotations

from diagnose.model import TemplateArg

BUILTINS = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
D_BUILTINS = {
    "d": "decimal64",
    "e": "decimal128",
    "f": "decimal32",
    "h": "half",
    "i": "char32_t",
    "s": "char16_t",
    "u": "char8_t",
    "a": "auto",
    "c": "decltype(auto)",
    "n": "decltype(nullptr)",
}
# How __cxa_demangle spells integer literals of these types: `Lj16E` is `16u`.
LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}
STD_SUBS = {
    "t": "std",
    "a": "std::allocator",
    "b": "std::basic_string",
    "s": "std::string",
    "i": "std::istream",
    "o": "std::ostream",
    "d": "std::iostream",
}
OPERATORS = {
    "nw": "new", "na": "new[]", "dl": "delete", "da": "delete[]", "ps": "+", "ng": "-",
    "ad": "&", "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%",
    "an": "&", "or": "|", "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=",
    "dV": "/=", "rM": "%=", "aN": "&=", "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>",
    "lS": "<<=", "rS": ">>=", "eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=",
    "ge": ">=", "ss": "<=>", "nt": "!", "aa": "&&", "oo": "||", "pp": "++", "mm": "--",
    "cm": ",", "pm": "->*", "pt": "->", "cl": "()", "ix": "[]", "qu": "?",
}  # fmt: skip
SPECIALS = {
    "TV": "vtable for",
    "TT": "VTT for",
    "TI": "typeinfo for",
    "TS": "typeinfo name for",
    "GV": "guard variable for",
}
MAX_DEPTH = 128
MAX_TEXT = 2_048  # characters of one rendered template argument
MAX_NODES = 2_000  # TemplateArg objects built for one name (substitutions form a DAG)
MAX_RENDER_STEPS = 20_000  # items rendered for one name, all parts together (real names: < 3,000)


class End(Exception):
    """Reading stopped: the input was cut, or held something this reader does not know."""


class Item:
    """A name or type being read; linked into its parent before it is complete.

    Linking first is what lets a cut in the middle keep everything read so far.
    """

    __slots__ = ("args", "closed", "done", "fn", "name", "parts", "suffix", "text")

    def __init__(self) -> None:
        self.text = ""  # rendered text before the template arguments of the last part
        self.name: str | None = None  # qualified name without template arguments
        self.parts: list[str] = []  # components without template arguments
        self.args: list[Item] | None = None  # template args of the last component
        self.closed = False  # the template argument list was read up to its `E`
        self.suffix = ""  # " const", "*", "&" ... applied after the arguments
        self.fn: tuple[str, str] | None = None  # (return type, params) of a function type
        self.done = True  # False while a template argument is still being read

    def copy(self) -> Item:
        """Shallow copy, used when a substitution or qualifier reuses an earlier item."""
        other = Item()
        other.text, other.name, other.parts = self.text, self.name, list(self.parts)
        other.args, other.closed, other.suffix, other.fn = (
            self.args,
            self.closed,
            self.suffix,
            self.fn,
        )
        other.done = self.done
        return other


def render(item: Item, budget: list[int]) -> str:
    """Spell ``item`` as __cxa_demangle would, ``...`` where it was cut; capped in length."""
    budget[0] -= 1
    if budget[0] < 0:
        return "..."
    if item.fn is not None:
        ret, params = item.fn
        mod = f"({item.suffix.strip()})" if item.suffix else ""
        return capped(f"{ret} {mod}({params})")
    out = item.text
    if item.args is not None:
        inner = ", ".join(r for r in (render(a, budget) for a in item.args) if r)
        if item.closed:
            out += f"<{inner}{' >' if inner.endswith('>') else '>'}"
        elif inner.endswith("..."):
            out += f"<{inner}"
        else:
            out += f"<{inner}, ..." if inner else "<..."
    elif not item.done:
        out += "..."
    out += item.suffix
    return capped(out)


def capped(text: str) -> str:
    """``text`` cut to :data:`MAX_TEXT` characters with ``...``: a type that names an earlier
    one twice (function pointers taking the previous level's type) doubles per level, so
    every spelt piece is capped where it is made, not only where it is printed."""
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def to_template_arg(item: Item, nodes: list[int], steps: list[int]) -> TemplateArg:
    """``item`` and its nested arguments as a :class:`TemplateArg` tree of at most ``nodes``
    nodes, spelt within ``steps`` render steps; both budgets are shared by the caller's
    other arguments, so the whole name, not each argument, is bounded."""
    nodes[0] -= 1
    text = render(item, steps)
    if nodes[0] < 0:
        return TemplateArg(text=text, name=item.name)
    args = tuple(to_template_arg(a, nodes, steps) for a in (item.args or ()))
    return TemplateArg(text=text, name=item.name, args=args)


def bare(item: Item) -> Item:
    """``item`` as rendered text up to and including its last template argument list."""
    out = item.copy()
    out.suffix, out.fn = "", None
    return out


def assign(dst: Item, src: Item) -> None:
    """Make ``dst`` spell what ``src`` spells (``done`` is kept: it is ``dst``'s own state)."""
    dst.text, dst.name, dst.parts = src.text, src.name, list(src.parts)
    dst.args, dst.closed, dst.suffix, dst.fn = src.args, src.closed, src.suffix, src.fn


def is_ctor_like(item: Item) -> bool:
    """Constructors, destructors and conversion operators encode no return type."""
    if len(item.parts) < 2:
        return item.parts[-1].startswith("operator ") if item.parts else False
    last, owner = item.parts[-1], item.parts[-2]
    return last in (owner, "~" + owner) or last.startswith("operator ")
