"""Recursive-descent reader for the start of an Itanium encoding: name, then parameters.

It reads what :func:`diagnose.frames.mangled_prefix.read_mangled_prefix` needs from a name
that may be cut anywhere: every item is linked into its parent before it is read, so a
cut keeps what came before it.  Reading stops with :class:`End` at the cut, at depth
``MAX_DEPTH``, or at anything this reader does not know (expressions, ``&function``).
"""

from __future__ import annotations

from diagnose.frames.mangled_spelling import (
    BUILTINS,
    D_BUILTINS,
    LITERAL_SUFFIX,
    MAX_DEPTH,
    MAX_RENDER_STEPS,
    OPERATORS,
    STD_SUBS,
    End,
    Item,
    assign,
    bare,
    capped,
    is_ctor_like,
    render,
)


class PrefixReader:
    """Recursive-descent reader for the start of an Itanium encoding (name, then params)."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.subs: list[Item] = []
        self.tparams: list[Item] | None = None
        self.depth = 0
        # One render budget for the whole name, shared by every part of it: substitutions
        # form a DAG that a hostile name makes exponential when spelt out, and a fresh
        # budget per part let 6 KB cost minutes (hardening issue).
        self.budget = [MAX_RENDER_STEPS]

    # -- characters ------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        """The character ``k`` ahead, ``""`` past the end."""
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def take(self) -> str:
        """Consume one character; :class:`End` at the end of the input."""
        if self.i >= len(self.s):
            raise End
        ch = self.s[self.i]
        self.i += 1
        return ch

    def need(self, ch: str) -> None:
        """Consume ``ch`` or stop reading."""
        if self.take() != ch:
            raise End

    def number(self) -> int:
        """A run of decimal digits (at least one)."""
        start = self.i
        while self.peek().isdigit():
            self.i += 1
        if self.i == start:
            raise End
        return int(self.s[start : self.i])

    def seq_id(self) -> int:
        """Base-36 ``<seq-id>`` then ``_``: ``S_`` is 0, ``S0_`` is 1."""
        start = self.i
        while self.peek().isdigit() or self.peek().isupper():
            self.i += 1
        digits = self.s[start : self.i]
        self.need("_")
        return int(digits, 36) + 1 if digits else 0

    def source_name(self) -> str:
        """``<len><identifier>``; a cut inside the identifier stops reading."""
        n = self.number()
        if self.i + n > len(self.s):
            raise End  # the cut fell inside the identifier: drop the partial word
        ident = self.s[self.i : self.i + n]
        self.i += n
        if ident.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        return ident

    # -- names ------------------------------------------------------------------------
    def enter(self) -> None:
        """One level deeper; stop past ``MAX_DEPTH`` (hostile nesting)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise End

    def add_sub(self, item: Item) -> None:
        """Record ``item`` as the next substitution candidate."""
        self.subs.append(item.copy())

    def substitution(self) -> Item:
        """``S...``: a back-reference or one of the ``St``/``Sa``/``Ss`` abbreviations."""
        self.need("S")
        ch = self.peek()
        if ch.islower():
            self.i += 1
            if ch not in STD_SUBS:
                raise End
            item = Item()
            item.text = item.name = STD_SUBS[ch]
            item.parts = item.text.split("::")
            return item
        index = self.seq_id()
        if index >= len(self.subs):
            raise End
        return self.subs[index].copy()

    def unqualified(self, item: Item) -> None:
        """Append one ``<unqualified-name>`` component to ``item``."""
        ch = self.peek()
        if ch == "L":  # internal linkage marker before a source name
            self.i += 1
            ch = self.peek()
        if ch.isdigit():
            part = self.source_name()
        elif ch in "CD" and self.peek(1) in "0123456789I" and item.parts:
            self.i += 1
            if self.peek() == "I":  # inheriting constructor: CI1 <type>
                raise End
            self.take()
            base = item.parts[-1]
            part = base if ch == "C" else "~" + base
        elif ch == "U":
            part = self.unnamed()
        elif ch.islower() and self.peek(1):
            code = ch + self.peek(1)
            self.i += 2
            if code == "cv":
                conv = Item()
                self.type(conv)
                part = "operator " + render(conv, self.budget)
            elif code in OPERATORS:
                op = OPERATORS[code]
                part = "operator" + (" " + op if op[0].isalpha() else op)
            else:
                raise End
        else:
            raise End
        while self.peek() == "B":  # ABI tags print as [abi:cxx11]
            self.i += 1
            part += f"[abi:{self.source_name()}]"
        self.push_part(item, part)

    def unnamed(self) -> str:
        """``Ut<n>_`` unnamed types and ``Ul<params>E<n>_`` lambdas."""
        self.need("U")
        kind = self.take()
        if kind == "t":
            return f"{{unnamed type#{self.seq_id_decimal() + 1}}}"
        if kind != "l":
            raise End
        params = self.params_until("E")
        return f"{{lambda({params})#{self.seq_id_decimal() + 1}}}"

    def seq_id_decimal(self) -> int:
        """Decimal ``<n>_`` of ``T<n>_`` and ``Ut<n>_``: ``_`` is 0, ``0_`` is 1."""
        start = self.i
        while self.peek().isdigit():
            self.i += 1
        digits = self.s[start : self.i]
        self.need("_")
        return int(digits) + 1 if digits else 0

    def push_part(self, item: Item, part: str) -> None:
        """Append a ``::`` component to ``item``."""
        if item.args is not None:  # a component after template args: fold them into text
            item.text = render(bare(item), self.budget)
            item.args, item.closed = None, False
        item.text = f"{item.text}::{part}" if item.text else part
        item.parts.append(part)
        item.name = "::".join(item.parts)

    def template_args(self, item: Item) -> None:
        """``I <arg>* E``: read into ``item.args`` (linked before reading, for cuts)."""
        self.need("I")
        args: list[Item] = []
        item.args, item.closed = args, False
        while self.peek() != "E":
            self.template_arg(args)
        self.i += 1
        item.closed = True

    def template_arg(self, args: list[Item]) -> None:
        """Read one template argument (or a pack of them) into ``args``."""
        self.enter()
        ch = self.peek()
        if ch == "J":  # argument pack: its members print inline
            self.i += 1
            while self.peek() != "E":
                self.template_arg(args)
            self.i += 1
        elif ch == "X" or ch == "":
            raise End  # expressions are not read here
        else:
            arg = Item()
            arg.done = False
            args.append(arg)
            self.literal(arg) if ch == "L" else self.type(arg)
            arg.done = True
        self.depth -= 1

    def literal(self, item: Item) -> None:
        """``L <type> <value> E``: integer, bool and enum literals as __cxa_demangle spells them."""
        self.need("L")
        if self.peek() == "_" and self.peek(1) == "Z":
            raise End  # &function arguments (nvcc's __nv_dl_tag) are not read here
        kind = Item()
        code = self.peek()
        if code in BUILTINS and code != "z":
            self.i += 1
            kind.text = BUILTINS[code]
        else:
            self.type(kind)
        negative = self.peek() == "n"
        if negative:
            self.i += 1
        start = self.i
        while self.peek() not in ("E", ""):
            self.i += 1
        value = self.s[start : self.i]
        self.need("E")
        sign = "-" if negative else ""
        if code == "b" and value in ("0", "1"):
            item.text = "true" if value == "1" else "false"
        elif code in LITERAL_SUFFIX and value.isdigit():
            item.text = f"{sign}{value}{LITERAL_SUFFIX[code]}"
        else:
            item.text = f"({render(kind, self.budget)}){sign}{value}"

    def type(self, item: Item) -> None:
        """Read one ``<type>`` into ``item``, adding substitution candidates as we go."""
        self.enter()
        ch = self.take()
        if ch in BUILTINS:
            item.text = BUILTINS[ch]
        elif ch == "D" and self.peek() in D_BUILTINS:
            item.text = D_BUILTINS[self.take()]
        elif ch in "rVK":
            self.type(item)
            item.suffix += {"r": " restrict", "V": " volatile", "K": " const"}[ch]
            self.add_sub(item)
        elif ch in "PRO":
            self.type(item)
            item.suffix += {"P": "*", "R": "&", "O": "&&"}[ch]
            self.add_sub(item)
        elif ch == "D" and self.peek() == "p":
            self.i += 1
            self.type(item)
            self.add_sub(item)
        elif ch == "F":
            ret = Item()
            self.type(ret)
            params = self.params_until("E")
            item.fn = (render(ret, self.budget), params)
            self.add_sub(item)
        elif ch == "A":
            dim = self.number() if self.peek().isdigit() else 0
            self.need("_")
            self.type(item)
            item.suffix += f" [{dim}]"
            self.add_sub(item)
        elif ch == "T":
            self.i -= 1
            self.template_param(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)
            self.add_sub(item)
        elif ch == "S":
            self.i -= 1
            std = self.peek(1) == "t"
            base = self.substitution()
            if std:  # `St <unqualified-name>`: a std:: class type
                base.parts, base.text = ["std"], "std"
                self.unqualified(base)
            assign(item, base)
            if self.peek() == "I":
                if std:
                    self.add_sub(item)
                self.template_args(item)
                self.add_sub(item)
            elif std:
                self.add_sub(item)
        elif ch == "N":
            self.nested(item)
            self.add_sub(item)
        elif ch.isdigit() or ch in "LZ":
            self.i -= 1
            if ch == "Z":
                self.local_name(item)
            else:
                self.unqualified(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)
            self.add_sub(item)
        else:
            raise End
        self.depth -= 1

    def template_param(self, item: Item) -> None:
        """``T<n>_``: the enclosing template's argument ``n``."""
        self.need("T")
        index = self.seq_id_decimal()
        if self.tparams is None or index >= len(self.tparams):
            raise End
        assign(item, self.tparams[index])

    def params_until(self, close: str) -> str:
        """Parameter types up to ``close``, joined; ``(void)`` prints as ``()``."""
        parts: list[str] = []
        while self.peek() != close:
            param = Item()
            self.type(param)
            parts.append(render(param, self.budget))
        self.i += 1
        return "" if parts == ["void"] else capped(", ".join(parts))

    def nested(self, item: Item) -> None:
        """``N [quals] <prefix> E`` (the ``N`` already read)."""
        while self.peek() in ("r", "V", "K", "R", "O"):
            self.i += 1  # method cv/ref-qualifiers
        first = True
        while self.peek() != "E":
            ch = self.peek()
            if ch == "":
                raise End
            if ch == "S" and first:
                std = self.peek(1) == "t"
                base = self.substitution()
                assign(item, base)
                if std:
                    item.parts, item.text, item.name = ["std"], "std", "std"
                first = False
                continue  # a substitution is not a new candidate
            elif ch == "T" and first:
                self.template_param(item)
            elif ch == "I":
                if item.args is not None:
                    raise End
                self.template_args(item)
            else:
                self.unqualified(item)
            first = False
            if self.peek() not in ("E", ""):
                self.add_sub(item)
        self.i += 1

    def local_name(self, item: Item) -> None:
        """``Z <encoding> E <entity>``: a name local to a function, e.g. a lambda."""
        self.need("Z")
        outer = Item()
        try:
            self.name(outer)
        finally:  # keep the enclosing function's name even when the rest is cut
            assign(item, outer)
        if outer.args is not None and outer.closed:
            self.tparams = outer.args
            if self.peek() != "E" and not is_ctor_like(outer):
                self.type(Item())  # a template function encodes its return type first
        params = self.params_until("E")
        item.text = f"{render(bare(outer), self.budget)}({params})"
        item.args, item.closed = None, False
        if self.peek() == "s":
            self.i += 1
            self.push_part(item, "string literal")
        elif self.peek() == "N":  # the entity may itself be nested: `...E NKUlvE_clE`
            self.i += 1
            inner = Item()
            try:
                self.nested(inner)
            finally:
                for part in inner.parts:
                    self.push_part(item, part)
        else:
            self.unqualified(item)
        if self.peek() == "_":  # discriminator
            self.i += 1
            if self.peek() == "_":
                self.i += 1
            self.number()

    def name(self, item: Item) -> None:
        """Read the ``<name>`` of an encoding into ``item``."""
        ch = self.peek()
        if ch == "N":
            self.i += 1
            self.nested(item)
        elif ch == "Z":
            self.local_name(item)
        elif ch == "S":
            std = self.peek(1) == "t"
            base = self.substitution()
            if std:
                base.parts, base.text = ["std"], "std"
                self.unqualified(base)
            assign(item, base)
            if self.peek() == "I":
                if std:
                    self.add_sub(item)
                self.template_args(item)
        else:
            self.unqualified(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)
