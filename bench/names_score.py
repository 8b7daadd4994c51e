"""Score ``parse_name`` against an independent oracle, side by side with tree-sitter-cpp.

Input: the real PyTorch/LLVM/libstdc++ symbols in ``../shared/peer/real-symbols-pytorch``,
spelled as ``__cxa_demangle`` prints them (what C++ loggers write).  Oracle:
``demangle.signature(mangled)``, which builds qualified name, return type and parameters
from the *mangled* structure, not from the text, so it shares no logic with either parser.
Only rows where the oracle's own spelling equals the input are scored (fair comparison).

Also scored: random truncations of the same names (``...`` appended at a random cut), and
Socorro siggen's ``drop_prefix_and_return_type`` cases.  Prints a table and ratios, and with
``--write`` stores it in ``bench/results/names.md``.

Run: ``.venv/bin/python bench/names_score.py [--write] [--limit N]``
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from diagnose.frames.names import _parse, parse_name  # noqa: E402

_ABI = re.compile(r"\[abi:[^\]]*\]")
_OPERATOR = re.compile(r"operator(?:\s*(?:<=>|<<=|>>=|->\*|->|<<|>>|<=|>=|<|>))?")


def strip_template_args(name: str) -> str:
    """Drop ``<...>`` groups (not operator symbols) from a name: an oracle-side helper.

    Written independently of the parser under test: a plain depth counter that treats
    ``<``/``>`` inside parentheses at template depth as comparisons.
    """
    out: list[str] = []
    depth = 0
    parens: list[int] = []  # template depth at which each open paren was seen
    i = 0
    while i < len(name):
        m = _OPERATOR.match(name, i)
        if m and (i == 0 or not (name[i - 1].isalnum() or name[i - 1] == "_")):
            if depth == 0:
                out.append(m.group())
            i = m.end()
            continue
        c = name[i]
        if c == "(":
            parens.append(depth)
        elif c == ")" and parens:
            parens.pop()
        in_expr = bool(parens) and parens[-1] == depth and depth > 0
        if c == "<" and not in_expr:
            depth += 1
        elif c == ">" and depth > 0 and not in_expr:
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out).strip()


def split_top_args(base: str) -> list[str] | None:
    """The top-level template argument texts of a base name ending in ``<...>``."""
    if not base.endswith(">"):
        return None
    depth = 0
    parens = 0
    start = None
    parts: list[str] = []
    cur = 0
    for i, c in enumerate(base):
        if c == "(":
            parens += 1
        elif c == ")":
            parens -= 1
        elif c == "<" and not parens:
            if depth == 0 and start is None and not base[:i].endswith("operator"):
                start = i + 1
                cur = i + 1
            depth += 1 if start is not None else 0
        elif c == ">" and start is not None and not parens:
            depth -= 1
        elif c == "," and depth == 1 and not parens and start is not None:
            parts.append(base[cur:i].strip())
            cur = i + 1
    if start is None:
        return None
    parts.append(base[cur:-1].strip())
    return [p for p in parts if p] or []


def last_component(name: str) -> str:
    """The text after the last ``::`` that is outside every bracket."""
    depth = 0
    cut = 0
    for i, c in enumerate(name):
        if c in "<([{":
            depth += 1
        elif c in ">)]}" and depth:
            depth -= 1
        elif c == ":" and depth == 0 and name.startswith("::", i):
            cut = i + 2
    return name[cut:]


@dataclass
class Row:
    """One scored name: the input text and the oracle's parts."""

    text: str
    qualified: str
    return_type: str
    params: tuple[str, ...] | None
    top_args: list[str] | None


def load_rows(limit: int | None) -> tuple[list[Row], int]:
    """Read the peer symbols and the oracle; return scored rows and the number skipped."""
    import demangle

    style = demangle.style("gnu", itanium={"expand_std_abbreviations": False})
    path = SHARED / "peer" / "real-symbols-pytorch" / "symbols.jsonl"
    rows: list[Row] = []
    skipped = 0
    with path.open() as fh:
        for line in fh:
            rec = json.loads(line)
            text = rec.get("cxa") or rec.get("gnu")
            if not text:
                skipped += 1
                continue
            try:
                sig = demangle.signature(rec["mangled"], style=style)
            except Exception:
                skipped += 1
                continue
            if sig.demangled != text:
                skipped += 1
                continue
            rows.append(
                Row(
                    text=text,
                    qualified=strip_template_args(_ABI.sub("", sig.qualified_name)),
                    return_type=sig.return_type or "",
                    params=sig.parameters,
                    top_args=split_top_args(_ABI.sub("", sig.base_name)),
                )
            )
            if limit and len(rows) >= limit:
                break
    return rows, skipped


@dataclass
class Guess:
    """What one parser said about one name."""

    qualified: str
    return_type: str
    params: tuple[str, ...] | None
    top_args: list[str] | None


def ours(text: str) -> Guess:
    """Our parser's reading of ``text``."""
    p = _parse(text)
    return Guess(
        qualified=p.qualified,
        return_type=p.return_type,
        params=p.params,
        top_args=[a.text for a in p.template_args] if p.template_args else None,
    )


class TreeSitter:
    """tree-sitter-cpp used as the research note describes: parse ``name;``, take the
    first ``function_declarator``, its ``declarator`` and ``parameters`` fields."""

    def __init__(self) -> None:
        import tree_sitter_cpp
        from tree_sitter import Language, Parser

        self.parser = Parser(Language(tree_sitter_cpp.language()))

    def __call__(self, text: str) -> Guess:
        data = (text + ";").encode()
        tree = self.parser.parse(data)
        stack = [tree.root_node]
        fd = None
        while stack:
            node = stack.pop()
            if node.type == "function_declarator":
                fd = node
                break
            stack.extend(reversed(node.children))
        if fd is None:
            return Guess(text, "", None, None)
        decl = fd.child_by_field_name("declarator")
        params_node = fd.child_by_field_name("parameters")
        if decl is None:
            return Guess(text, "", None, None)
        name = data[decl.start_byte : decl.end_byte].decode(errors="replace")
        params: tuple[str, ...] | None = None
        if params_node is not None:
            params = tuple(
                data[c.start_byte : c.end_byte].decode(errors="replace")
                for c in params_node.named_children
                if c.type != "comment"
            )
        last = last_component(name)
        return Guess(
            qualified=strip_template_args(name),
            return_type=data[: decl.start_byte].decode(errors="replace").strip(),
            params=params,
            top_args=split_top_args(last),
        )


def score(rows: list[Row], fn: Callable[[str], Guess]) -> dict[str, Any]:
    """Field-by-field accuracy of ``fn`` over ``rows`` plus its speed."""
    ok_q = ok_r = ok_p = ok_all = ok_t = n_t = 0
    t0 = time.perf_counter()
    guesses = [fn(r.text) for r in rows]
    elapsed = time.perf_counter() - t0
    for r, g in zip(rows, guesses, strict=True):
        q = g.qualified == r.qualified
        rt = g.return_type == r.return_type
        pa = g.params == r.params
        ok_q += q
        ok_r += rt
        ok_p += pa
        ok_all += q and rt and pa
        if r.top_args is not None:
            n_t += 1
            ok_t += g.top_args == r.top_args
    n = len(rows)
    return {
        "qualified": ok_q / n,
        "return_type": ok_r / n,
        "params": ok_p / n,
        "all_three": ok_all / n,
        "top_template_args": ok_t / max(1, n_t),
        "names_per_s": n / elapsed,
    }


def truncation_score(rows: list[Row], seed: int = 7, count: int = 3000) -> dict[str, float]:
    """Cut names at a random point, append ``...``; is ``truncated`` set, is the prefix kept?"""
    rng = random.Random(seed)
    sample = rng.sample(rows, min(count, len(rows)))
    flagged = consistent = 0
    for r in sample:
        full = parse_name(r.text)
        comps = [*full.scope, full.name]
        # Cut inside the name itself, not inside `vtable for` or the return type.
        start = len(full.special) + 1 if full.special else 0
        start += len(full.return_type) + 1 if full.return_type else 0
        end = start + max(1, len(r.text[start:].split("(", 1)[0]))
        cut = rng.randint(min(start + 1, end), end)
        p = parse_name(r.text[:cut] + "...")
        flagged += p.truncated
        got = [*p.scope, p.name]
        same = len(got) <= len(comps) and all(a == b for a, b in zip(got[:-1], comps, strict=False))
        if same and got:
            same = comps[len(got) - 1].startswith(got[-1]) or not got[-1]
        consistent += same
    return {"truncated_flag": flagged / len(sample), "prefix_consistent": consistent / len(sample)}


def socorro_score(ts: TreeSitter | None) -> dict[str, tuple[int, int]]:
    """Socorro's drop_prefix_and_return_type: does each parser drop exactly the prefix?"""
    cases = json.loads((SHARED / "peer" / "socorro-siggen" / "expected.json").read_text())
    table = cases["drop_prefix_and_return_type"]["cases"]
    storage = {"static", "virtual", "public:", "private:", "protected:"}
    ok_ours = ok_ts = 0
    for c in table:
        fn, exp = c["function"], c["expected"]
        want = fn[: len(fn) - len(exp)].strip() if fn.endswith(exp) else None
        p = _parse(fn)
        lead = [q for q in p.qualifiers if q in storage]
        got = " ".join([*lead, p.return_type]).strip()
        ok_ours += got == want
        if ts is not None:
            ok_ts += ts(fn).return_type == want
    return {"ours": (ok_ours, len(table)), "tree_sitter": (ok_ts, len(table))}


def main() -> int:
    """Run every score, print a side-by-side table, optionally write the results file."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help="write bench/results/names.md")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    if not SHARED.is_dir():
        print("../shared is absent: nothing to score")
        return 0
    rows, skipped = load_rows(args.limit)
    try:
        ts: TreeSitter | None = TreeSitter()
    except ImportError:
        ts = None
    ours_s = score(rows, ours)
    ts_s = score(rows, ts) if ts is not None else None
    trunc = truncation_score(rows)
    soc = socorro_score(ts)

    lines = [
        "# parse_name vs tree-sitter-cpp",
        "",
        f"Names: {len(rows)} real symbols from `shared/peer/real-symbols-pytorch`, "
        f"`__cxa_demangle` spelling ({skipped} skipped: no oracle or oracle spells differently).",
        "Oracle: `demangle.signature(mangled, style=gnu, expand_std_abbreviations=False)`;",
        "qualified names compared without template arguments and ABI tags.",
        "",
        "| metric | ours | tree-sitter-cpp | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key in ("qualified", "return_type", "params", "all_three", "top_template_args"):
        a = ours_s[key]
        b = ts_s[key] if ts_s else float("nan")
        lines.append(f"| {key} | {a:.1%} | {b:.1%} | {a / b if b else float('inf'):.2f}x |")
    a, b = ours_s["names_per_s"], ts_s["names_per_s"] if ts_s else float("nan")
    lines.append(f"| names/s | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |")
    lines += [
        "",
        f"Truncation (3,000 names cut at random in the name, `...` appended): "
        f"`truncated` set on {trunc['truncated_flag']:.1%}, "
        f"components a consistent prefix of the uncut parse on {trunc['prefix_consistent']:.1%}.",
        "",
        f"Socorro `drop_prefix_and_return_type`: ours {soc['ours'][0]}/{soc['ours'][1]}, "
        f"tree-sitter-cpp {soc['tree_sitter'][0]}/{soc['tree_sitter'][1]}.",
        "",
        "Caveats: the parser was tuned while looking at these names, so treat the scores",
        "as an upper bound; the remaining params misses are parameter packs, which the",
        "oracle joins into one string. The research note measured 96.5% all-three on a",
        "different 13,926-name sample with an earlier scratch parser.",
        "",
        "Command: `.venv/bin/python bench/names_score.py --write`",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        out = ROOT / "bench" / "results" / "names.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
