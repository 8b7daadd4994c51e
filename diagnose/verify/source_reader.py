"""Read what an installed FlashInfer can do on SM120 from its own C++ sources.

FlashInfer's wheel ships the TensorRT-LLM-derived C++ it JIT-compiles
(``flashinfer/data/csrc/...``).  The tiles a given version can pick for SM120
block-scaled GEMMs live in three places of that tree (research notes
gpu-facts.md §3.2):

* ``cutlass_heuristic.cpp``: ``get_candidate_configs_sm120`` returns
  ``CutlassTileConfigSM120::CtaShape{M}x{N}x{K}B`` enumerators (K in BYTES),
  split by ``#ifdef FAST_BUILD`` and by ``config & GROUPED_GEMM``; newer
  versions prune the grouped list with a ``switch`` inside a ``remove_if``
  predicate (``return true`` = never dispatches, ``return fp8_act`` = only with
  FP8 activations).
* ``moe_gemm_template_dispatch_tma_ws.h``: ``are_tile_shapes_supported_sm120``
  (a ``constexpr`` predicate over the tile in ELEMENTS) and the
  ``SHAPE_CASE(120, M, N, K)`` cases of the grouped dispatch; any other
  enumerator throws "Unsupported tile shape config".

They are read with tree-sitter's C++ grammar: enumerators by node, the
predicate by evaluating its ``if constexpr`` / ``return`` statements for each
tile.  :func:`framework_tiles` joins the three into "this version can pick X,
not Y because ...".  :func:`source_context` shows the lines around a throw site
the log names.  The sources come from ``$CRASHKB_FLASHINFER_SRC`` (a checkout
or an unpacked wheel) or the installed ``flashinfer`` package, found without
importing it.  Everything is bounded: file sizes, directory entries walked,
line lengths; nothing here raises for a missing, odd or hostile tree.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.records import record

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

ENV_VAR = "CRASHKB_FLASHINFER_SRC"
HEURISTIC_FILE = "cutlass_heuristic.cpp"
DISPATCH_FILE = "moe_gemm_template_dispatch_tma_ws.h"
CANDIDATES_FN = "get_candidate_configs_sm120"
SUPPORTED_FN = "are_tile_shapes_supported_sm120"

MAX_FILE_BYTES = 1 << 21  # 2 MiB; the real files are under 64 KiB
MAX_ENTRIES = 50_000  # directory entries visited per tree (0.7.4's data/ holds ~8.5k files)
MAX_DEPTH = 16
MAX_LINE_CHARS = 300
MAX_RADIUS = 40
MAX_DOMAIN = 12  # distinct values per tile dimension tried against the predicate
SOURCE_SUFFIXES = frozenset({".h", ".hpp", ".cuh", ".cu", ".inl", ".cpp", ".cc", ".cxx"})
# Where the sources sit inside the package (wheel) or a checkout; searched before the root.
_SUBDIRS = ("data/csrc", "data/include", "csrc", "include")

_ENUM = re.compile(r"CutlassTileConfigSM120::CtaShape(\d{1,4})x(\d{1,4})x(\d{1,4})B")
_FILE_NAME = re.compile(r"[\w.+-]{1,200}")

Shape = tuple[int, int, int]


@record
class SourceTree:
    """An indexed FlashInfer source tree: where it is, where it came from, its C++ files."""

    root: Path
    origin: str
    version: str = ""
    files: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    truncated: bool = False

    @property
    def label(self) -> str:
        """``FlashInfer 0.7.4 (installed)`` style name for notes."""
        version = f" {self.version}" if self.version else ""
        return f"FlashInfer{version} ({self.origin})"

    def find(self, name: str) -> Path | None:
        """The file called ``name`` (a base name or a path tail); the best tail match wins."""
        parts = [p for p in re.split(r"[/\\]", name) if p and p not in {".", ".."}]
        if not parts or not _FILE_NAME.fullmatch(parts[-1]):
            return None
        paths = self.files.get(parts[-1], ())
        if not paths:
            return None

        def shared(path: Path) -> int:
            n = 0
            for mine, theirs in zip(reversed(path.parts), reversed(parts), strict=False):
                if mine != theirs:
                    break
                n += 1
            return n

        return max(paths, key=lambda p: (shared(p), -len(p.parts)))


@record
class Candidate:
    """One enumerator the candidate list returns, and on which build / GEMM path.

    ``shape`` is as named (K in bytes).  ``build`` is ``"fast"`` (``FAST_BUILD``),
    ``"full"`` or ``"any"``; ``grouped`` is ``None`` when the path does not matter.
    """

    name: str
    shape: Shape
    build: str
    grouped: bool | None
    line: int


@record
class Exclusion:
    """A candidate the heuristic prunes again: ``when`` is ``"always"`` or the condition's text."""

    name: str
    when: str
    build: str
    grouped: bool | None
    line: int


@record
class Pickable:
    """One tile a version offers on a path, in ELEMENTS; ``dropped`` says why it cannot run."""

    name: str
    tile: Shape
    dropped: str = ""


@record
class TileSource:
    """What the sources say about SM120 tiles (see the module docstring for where each lives).

    ``supported`` holds the element shapes ``are_tile_shapes_supported_sm120``
    accepts at cluster 1x1x1 (``None`` when the function was not found);
    ``undecided`` the shapes it could not evaluate.  ``dispatch`` holds the
    enumerator names the grouped dispatch has a case for (``None``: not found).
    """

    origin: str
    version: str
    heuristic: str
    candidates: tuple[Candidate, ...]
    exclusions: tuple[Exclusion, ...] = ()
    supported: frozenset[Shape] | None = None
    undecided: frozenset[Shape] = frozenset()
    dispatch: frozenset[str] | None = None
    dense_fast_build: bool | None = None
    notes: tuple[str, ...] = ()

    def offered(self, *, grouped: bool, fast_build: bool) -> tuple[Candidate, ...]:
        """The candidates on this path and build, first occurrence of each name."""
        build = "fast" if fast_build else "full"
        seen: dict[str, Candidate] = {}
        for c in self.candidates:
            if c.build in (build, "any") and c.grouped in (None, grouped):
                seen.setdefault(c.name, c)
        return tuple(seen.values())

    def pickable(self, *, bits_a: int, grouped: bool, fast_build: bool) -> tuple[Pickable, ...]:
        """Every offered tile in elements (K_el = K_B·8/bits(A)) and why it is dropped, if so."""
        build = "fast" if fast_build else "full"
        out = []
        for c in self.offered(grouped=grouped, fast_build=fast_build):
            tile = (c.shape[0], c.shape[1], c.shape[2] * 8 // max(bits_a, 1))
            why = ""
            for x in self.exclusions:
                if x.name != c.name or x.build not in (build, "any"):
                    continue
                if x.grouped not in (None, grouped):
                    continue
                # The prune's condition is a local such as `fp8_act = config & FP8FP4_MIXED`;
                # only FP8-activation conditions are modelled, others keep the tile.
                if x.when == "always" or ("fp8" in x.when.lower() and bits_a == 8):
                    cond = x.when.split(" = ")[0]
                    why = f"pruned {'always' if cond == 'always' else 'when ' + cond}"
                    break
            if not why and grouped and self.dispatch is not None and c.name not in self.dispatch:
                why = "no grouped dispatch case"
            if not why and grouped and self.supported is not None and tile not in self.supported:
                if tile in self.undecided:
                    why = f"{SUPPORTED_FN} could not be evaluated for it"
                else:
                    why = f"{SUPPORTED_FN} rejects {'x'.join(map(str, tile))}"
            out.append(Pickable(c.name, tile, why))
        return tuple(out)


@record
class FrameworkTiles:
    """The answer for one crash: the installed version's tiles, or why the kb table is used."""

    tiles: tuple[Pickable, ...] = ()
    origin: str = ""
    version: str = ""
    notes: tuple[str, ...] = ()

    @property
    def usable(self) -> tuple[Shape, ...]:
        """Element tiles the version can really pick (nothing dropped)."""
        return tuple(t.tile for t in self.tiles if not t.dropped)


@record
class SourceContext:
    """Lines around a throw site: ``lines`` are ``(1-based number, text)`` pairs."""

    path: str
    line: int
    lines: tuple[tuple[int, str], ...]
    origin: str

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"file", "line", "origin", "lines": [[n, text], ...]}``."""
        return {
            "file": self.path,
            "line": self.line,
            "origin": self.origin,
            "lines": [[n, t] for n, t in self.lines],
        }


# --------------------------------------------------------------------------- locating sources


def find_tree(env: Mapping[str, str] | None = None) -> SourceTree | None:
    """The FlashInfer sources: ``$CRASHKB_FLASHINFER_SRC`` first, else the installed package."""
    env = os.environ if env is None else env
    explicit = env.get(ENV_VAR, "").strip()
    if explicit:
        root = Path(explicit).expanduser()
        if not root.is_dir():
            return None
        return _indexed(str(root.resolve()), f"${ENV_VAR}", _tree_version(root))
    pkg = _package_dir()
    if pkg is None:
        return None
    return _indexed(str(pkg), "installed", _installed_version() or _tree_version(pkg))


def _package_dir() -> Path | None:
    """The ``flashinfer`` package directory, located without importing the package."""
    try:
        spec = importlib.util.find_spec("flashinfer")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations and Path(locations[0]).is_dir() else None


def _installed_version() -> str:
    import importlib.metadata  # only when a package was found: it costs ~10 ms to import

    for dist in ("flashinfer-python", "flashinfer"):
        try:
            return _safe_version(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def _tree_version(root: Path) -> str:
    """A checkout's ``version.txt`` or a package's ``_build_meta.py`` ``__version__``."""
    text = _read_small(root / "version.txt", 64).strip()
    if text:
        return _safe_version(text)
    for rel in ("_build_meta.py", "flashinfer/_build_meta.py", "version.py"):
        m = re.search(r"__version__\s*=\s*[\"']([^\"']{1,40})", _read_small(root / rel, 1 << 16))
        if m:
            return _safe_version(m.group(1))
    return ""


def _safe_version(text: str) -> str:
    m = re.match(r"[0-9][0-9A-Za-z.+-]{0,30}", text)
    return m.group(0) if m else ""


def _indexed(root: str, origin: str, version: str) -> SourceTree:
    try:
        stamp = Path(root).stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _index(root, stamp, origin, version)


@lru_cache(maxsize=4)
def _index(root: str, stamp: int, origin: str, version: str) -> SourceTree:
    """Index the tree's C++ files by base name; walks at most ``MAX_ENTRIES`` entries."""
    base = Path(root)
    tops = [base / s for s in _SUBDIRS if (base / s).is_dir()] or [base]
    files: dict[str, list[Path]] = {}
    budget = MAX_ENTRIES
    for top in tops:
        for path in _walk(top, MAX_DEPTH):
            budget -= 1
            if budget < 0:
                break
            if path.suffix in SOURCE_SUFFIXES:
                files.setdefault(path.name, []).append(path)
    frozen = {k: tuple(sorted(v)) for k, v in files.items()}
    return SourceTree(base, origin, version, frozen, truncated=budget < 0)


def _walk(top: Path, depth: int) -> Iterator[Path]:
    """Files under ``top`` (no symlinked directories), breadth by directory, to ``depth``."""
    stack = [(top, 0)]
    while stack:
        here, level = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if level < depth:
                        stack.append((Path(entry.path), level + 1))
                elif entry.is_file():
                    yield Path(entry.path)
            except OSError:
                continue


def _read_small(path: Path, limit: int | None = None) -> str:
    """A file as text; empty when unreadable or larger than ``limit`` (``MAX_FILE_BYTES``)."""
    try:
        if path.stat().st_size > (MAX_FILE_BYTES if limit is None else limit):
            return ""
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- throw-site context


def source_context(
    file_name: str, line: int, radius: int = 6, *, tree: SourceTree | None = None
) -> SourceContext | None:
    """The lines around ``file_name:line`` when that file is in the FlashInfer sources."""
    if not 1 <= line <= 1_000_000:
        return None
    tree = tree if tree is not None else find_tree()
    path = tree.find(file_name[:1000]) if tree else None
    if tree is None or path is None:
        return None
    text = _read_small(path)
    rows = text.splitlines()
    if not text or line > len(rows):
        return None
    radius = max(0, min(radius, MAX_RADIUS))
    lo, hi = max(1, line - radius), min(len(rows), line + radius)
    lines = tuple((n, rows[n - 1][:MAX_LINE_CHARS]) for n in range(lo, hi + 1))
    origin = tree.label
    return SourceContext(str(path), line, lines, origin)


# --------------------------------------------------------------------------- reading tiles


@lru_cache(maxsize=1)
def _parser() -> Parser | None:
    """A C++ tree-sitter parser, or ``None`` when the ``verify`` extra is not installed."""
    try:
        import tree_sitter_cpp
        from tree_sitter import Language, Parser
    except ImportError:
        return None
    return Parser(Language(tree_sitter_cpp.language()))


def tree_sitter_available() -> bool:
    """True when tree-sitter and its C++ grammar import."""
    return _parser() is not None


def read_tiles(tree: SourceTree) -> TileSource | None:
    """Parse the candidate list and the SM120 shape checks out of ``tree``; ``None`` if absent."""
    parser = _parser()
    heuristic = tree.find(HEURISTIC_FILE)
    if parser is None or heuristic is None:
        return None
    text = _read_small(heuristic)
    root = parser.parse(text.encode()).root_node if text else None
    fn = _function(root, CANDIDATES_FN) if root is not None else None
    if fn is None:
        return None
    notes: list[str] = []
    cands, excl = _candidates(fn, notes)
    origin = tree.label
    supported: frozenset[Shape] | None = None
    undecided: frozenset[Shape] = frozenset()
    dispatch: frozenset[str] | None = None
    dispatch_path = tree.find(DISPATCH_FILE)
    dtext = _read_small(dispatch_path) if dispatch_path else ""
    if dtext:
        droot = parser.parse(dtext.encode()).root_node
        pred = _function(droot, SUPPORTED_FN)
        if pred is not None:
            supported, undecided = _supported(pred, cands)
        cases = _dispatch_cases(droot)
        dispatch = frozenset(cases) if cases else None
    return TileSource(
        origin=origin,
        version=tree.version,
        heuristic=str(heuristic),
        candidates=cands,
        exclusions=excl,
        supported=supported,
        undecided=undecided,
        dispatch=dispatch,
        dense_fast_build=_dense_fast_build(tree.root),
        notes=tuple(notes),
    )


def _walk_nodes(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text else ""


def _function(root: Node, name: str) -> Node | None:
    """The definition (with a body) of the function called ``name``."""
    for n in _walk_nodes(root):
        if n.type != "function_definition" or n.child_by_field_name("body") is None:
            continue
        decl = n.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        target = decl.child_by_field_name("declarator") if decl is not None else None
        if target is not None and _text(target).split("::")[-1] == name:
            return n
    return None


def _candidates(fn: Node, notes: list[str]) -> tuple[tuple[Candidate, ...], tuple[Exclusion, ...]]:
    """Enumerators the function returns (with build/path context) and the ones it prunes."""
    prunes = "remove_if" in _text(fn) or "erase" in _text(fn)
    cands: list[Candidate] = []
    excl: list[Exclusion] = []

    def visit(node: Node, build: str, grouped: bool | None) -> None:
        if node.type in {"preproc_ifdef", "preproc_if"}:
            fast = _fast_build_branch(node)
            if fast is not None:
                alt = node.child_by_field_name("alternative")
                for child in node.named_children:
                    if child.id == (alt.id if alt else -1) or child.type == "identifier":
                        continue
                    visit(child, "fast" if fast else "full", grouped)
                if alt is not None:
                    for child in alt.named_children:
                        visit(child, "full" if fast else "fast", grouped)
                return
        if node.type == "if_statement":
            cond = _text(node.child_by_field_name("condition"))
            if "GROUPED_GEMM" in cond:
                neg = bool(re.search(r"!\s*\(|==\s*0\b", cond))
                then = node.child_by_field_name("consequence")
                other = node.child_by_field_name("alternative")
                if then is not None:
                    visit(then, build, not neg)
                if other is not None:
                    visit(other, build, neg)
                return
        if node.type == "qualified_identifier" and node.parent is not None:
            m = _ENUM.search(_text(node))
            if m and node.parent.type != "qualified_identifier":
                name = f"CtaShape{m.group(1)}x{m.group(2)}x{m.group(3)}B"
                shape = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
                line = node.start_point[0] + 1
                if node.parent.type == "case_statement":
                    when = _case_outcome(node.parent, fn) if prunes else None
                    if when:
                        excl.append(Exclusion(name, when, build, grouped, line))
                    elif not prunes:
                        notes.append(f"case {name} at line {line} is not a prune; ignored")
                else:
                    cands.append(Candidate(name, shape, build, grouped, line))
                return
        for child in node.named_children:
            visit(child, build, grouped)

    body = fn.child_by_field_name("body")
    if body is not None:
        visit(body, "any", None)
    return tuple(cands), tuple(excl)


def _fast_build_branch(node: Node) -> bool | None:
    """For ``#ifdef/#ifndef/#if [!]defined(FAST_BUILD)``: does the first branch mean FAST_BUILD?"""
    directive = node.children[0].type if node.children else ""
    if node.type == "preproc_ifdef":
        if _text(node.child_by_field_name("name")) != "FAST_BUILD":
            return None
        return directive == "#ifdef"
    cond = _text(node.child_by_field_name("condition"))
    if "FAST_BUILD" not in cond:
        return None
    return not re.search(r"!\s*defined", cond)


def _case_outcome(case: Node, fn: Node) -> str | None:
    """What a pruning ``case`` label returns, following fall-through; ``None`` for ``false``."""
    sibling: Node | None = case
    while sibling is not None:
        if sibling.type == "case_statement":
            for n in _walk_nodes(sibling):
                if n.type == "return_statement":
                    value = _text(n.named_children[0]) if n.named_children else ""
                    if value == "false":
                        return None
                    if value == "true":
                        return "always"
                    return _declaration_of(value, fn) or value[:120]
        sibling = sibling.next_named_sibling
    return None


def _declaration_of(name: str, fn: Node) -> str:
    """``name = <initializer>`` for a local declared in ``fn`` (the prune's condition)."""
    if not re.fullmatch(r"\w{1,64}", name):
        return ""
    for n in _walk_nodes(fn):
        if n.type == "init_declarator" and _text(n.child_by_field_name("declarator")) == name:
            value = " ".join(_text(n.child_by_field_name("value")).split())
            return f"{name} = {value}"[:160]
    return ""


def _dispatch_cases(root: Node) -> list[str]:
    """Enumerators the grouped dispatch handles: ``SHAPE_CASE(120, M, N, K)`` invocations."""
    out = []
    for n in _walk_nodes(root):
        if n.type != "call_expression" or _text(n.child_by_field_name("function")) != "SHAPE_CASE":
            continue
        args = n.child_by_field_name("arguments")
        nums = [_text(a) for a in args.named_children] if args is not None else []
        if len(nums) == 4 and nums[0] in {"120", "121"} and all(x.isdigit() for x in nums):
            out.append(f"CtaShape{nums[1]}x{nums[2]}x{nums[3]}B")
    return out


def _dense_fast_build(root: Path) -> bool | None:
    """Whether the dense SM120 FP4 JIT module is compiled with ``-DFAST_BUILD``.

    FlashInfer 0.7.x's ``gen_gemm_sm120_module_cutlass_fp4`` passes it, so the dense
    path gets the FAST_BUILD candidate branch while the MoE module (``use_fast_build``
    defaults to False) gets the full list.
    """
    for rel in ("jit/gemm/core.py", "flashinfer/jit/gemm/core.py"):
        text = _read_small(root / rel)
        start = text.find("def gen_gemm_sm120_module_cutlass_fp4")
        if start >= 0:
            end = text.find("\ndef ", start + 1)
            return "-DFAST_BUILD" in text[start : end if end > 0 else len(text)]
    return None


# --------------------------------------------------------------------------- the shape predicate


class _Unknown(Exception):
    """The expression uses something the evaluator does not model."""


def _supported(
    pred: Node, cands: tuple[Candidate, ...]
) -> tuple[frozenset[Shape], frozenset[Shape]]:
    """Shapes the predicate accepts at cluster 1x1x1, and those it could not decide.

    The domain per dimension is every power-of-two literal in the function plus
    each candidate's dimensions under 4-, 8- and 16-bit activations, so every
    tile :meth:`TileSource.pickable` can ask about was evaluated.
    """
    literals = set()
    for n in _walk_nodes(pred):
        if n.type == "number_literal":
            v = _int(_text(n))
            if v is not None and 16 <= v <= 1024 and v & (v - 1) == 0:
                literals.add(v)
    dims: list[set[int]] = [set(literals), set(literals), set(literals)]
    for c in cands:
        dims[0].add(c.shape[0])
        dims[1].add(c.shape[1])
        dims[2].update(c.shape[2] * 8 // b for b in (4, 8, 16))
    doms = [sorted(d)[:MAX_DOMAIN] for d in dims]
    ok: set[Shape] = set()
    unknown: set[Shape] = set()
    body = pred.child_by_field_name("body")
    for tm in doms[0]:
        for tn in doms[1]:
            for tk in doms[2]:
                tile = (tm, tn, tk)
                try:
                    result = _run(body, {}, tile) if body is not None else None
                except (_Unknown, RecursionError, ZeroDivisionError):
                    unknown.add(tile)
                    continue
                if result is None:
                    unknown.add(tile)
                elif result:
                    ok.add(tile)
    return frozenset(ok), frozenset(unknown)


def _run(node: Node, env: dict[str, int], tile: Shape) -> bool | None:
    """Execute a statement; the returned value, or ``None`` when control falls through."""
    t = node.type
    if t == "compound_statement":
        for child in node.named_children:
            r = _run(child, env, tile)
            if r is not None:
                return r
        return None
    if t == "declaration":
        for d in node.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                name = _text(d.child_by_field_name("declarator"))
                value = d.child_by_field_name("value")
                if value is not None:
                    env[name] = int(_eval(value, env, tile))
        return None
    if t == "if_statement":
        cond = node.child_by_field_name("condition")
        value = cond.child_by_field_name("value") if cond is not None else None
        if value is None:
            raise _Unknown("if without a condition")
        branch = node.child_by_field_name(
            "consequence" if _eval(value, env, tile) else "alternative"
        )
        if branch is not None and branch.type == "else_clause":
            branch = branch.named_children[0] if branch.named_children else None
        return _run(branch, env, tile) if branch is not None else None
    if t == "return_statement":
        if not node.named_children:
            raise _Unknown("bare return")
        return bool(_eval(node.named_children[0], env, tile))
    if t in {"comment", "using_declaration", "alias_declaration", "static_assert_declaration"}:
        return None
    if t == "expression_statement" and not node.named_children:
        return None
    raise _Unknown(t)


_BINARY: dict[str, Callable[[int, int], int]] = {
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b),
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}


def _eval(node: Node, env: dict[str, int], tile: Shape) -> int:
    """Evaluate a constant expression over the tile (``size<i>(CtaShape{})``, ``TileM``...)."""
    t = node.type
    if t == "number_literal":
        v = _int(_text(node))
        if v is None:
            raise _Unknown(_text(node))
        return v
    if t in {"true", "false"}:
        return int(t == "true")
    if t == "parenthesized_expression":
        return _eval(node.named_children[0], env, tile)
    if t == "identifier":
        name = _text(node)
        if name in env:
            return env[name]
        raise _Unknown(name)
    if t == "unary_expression":
        op = _text(node.child_by_field_name("operator"))
        arg = node.child_by_field_name("argument")
        if arg is None or op not in {"!", "-"}:
            raise _Unknown(op)
        v = _eval(arg, env, tile)
        return int(not v) if op == "!" else -v
    if t == "binary_expression":
        op = _text(node.child_by_field_name("operator"))
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            raise _Unknown(op)
        if op == "&&":
            return int(bool(_eval(left, env, tile)) and bool(_eval(right, env, tile)))
        if op == "||":
            return int(bool(_eval(left, env, tile)) or bool(_eval(right, env, tile)))
        if op not in _BINARY:
            raise _Unknown(op)
        return int(_BINARY[op](_eval(left, env, tile), _eval(right, env, tile)))
    if t == "conditional_expression":
        cond = node.child_by_field_name("condition")
        pick = "consequence" if cond is not None and _eval(cond, env, tile) else "alternative"
        branch = node.child_by_field_name(pick)
        if branch is None:
            raise _Unknown(pick)
        return _eval(branch, env, tile)
    if t == "call_expression":
        return _shape_size(node, tile)
    raise _Unknown(t)


def _shape_size(call: Node, tile: Shape) -> int:
    """``[cute::]size<i>(CtaShape{})`` / ``get<i>(...)``: the tile's dim i; a cluster's is 1."""
    fn = _text(call.child_by_field_name("function"))
    m = re.fullmatch(r"(?:\w+::)?(?:size|get)<([012])>", fn.replace(" ", ""))
    args = _text(call.child_by_field_name("arguments"))
    if not m:
        raise _Unknown(fn)
    if "Cluster" in args:
        return 1  # the candidates all use ClusterShape_1x1x1
    if re.search(r"Cta|Tile", args):
        return tile[int(m.group(1))]
    raise _Unknown(args)


def _int(text: str) -> int | None:
    m = re.fullmatch(r"(\d{1,9})[uUlL]{0,3}", text)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- the verifier's entry


def framework_tiles(
    *, family: str, bits_a: int, log_version: str = "", env: Mapping[str, str] | None = None
) -> FrameworkTiles:
    """The tiles the installed FlashInfer can pick for an SM120 block-scaled GEMM of ``family``.

    ``family`` is ``cutlass-grouped-blockscaled`` (MoE) or ``cutlass-dense-blockscaled``;
    ``bits_a`` the activation's bits (the enum's K is bytes).  When no sources or
    no tree-sitter are found the result has no tiles and a note saying why, and
    the caller keeps the kb table.
    """
    grouped = family == "cutlass-grouped-blockscaled"
    if not tree_sitter_available():
        return FrameworkTiles(
            notes=("tree-sitter is not installed (extra 'verify'): tiles from the kb table.",)
        )
    tree = find_tree(env)
    if tree is None:
        where = (env if env is not None else os.environ).get(ENV_VAR, "")
        why = f"${ENV_VAR}={where[:120]} is not a directory" if where else "FlashInfer not found"
        return FrameworkTiles(notes=(f"{why}: tiles from the kb table.",))
    src = read_tiles(tree)
    origin = tree.label
    if src is None:
        return FrameworkTiles(
            origin=origin,
            notes=(f"No {CANDIDATES_FN} in {origin}'s sources: tiles from the kb table.",),
        )
    notes = list(src.notes)
    fast = False if grouped else bool(src.dense_fast_build)
    if not grouped and src.dense_fast_build is None:
        notes.append("Whether the dense FP4 module uses FAST_BUILD is unknown; full list assumed.")
    tiles = src.pickable(bits_a=bits_a, grouped=grouped, fast_build=fast)
    if log_version and tree.version and log_version != tree.version:
        notes.append(
            f"The log's FlashInfer is {log_version} but the sources read are {tree.version}: "
            "the tile list is the installed version's."
        )
    if not tiles:
        notes.append(f"{origin} offers no SM120 tile on this path: tiles from the kb table.")
    return FrameworkTiles(tiles, origin, tree.version, tuple(notes))
