"""Load the knowledge base (``kb/``) into frozen objects: causes, fixes, references, GPU facts.

The knowledge is data: ``kb/causes/<cause-id>.toml`` (one root cause each),
``kb/gpus.toml`` (per-compute-capability limits and the products that have them)
and ``kb/meta.toml`` (the calendar version).  This module parses them lazily on
the first :func:`load_kb` call, validates them strictly (unknown fields, wrong
types, missing required fields, duplicate ids, id different from the file
stem) and raises :class:`~diagnose.errors.RuleFileError` naming file, line and
field.  Importing it costs only the standard library; ``rapidfuzz`` is imported
when a fuzzy lookup actually needs it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from diagnose.concepts import Concept, parse_concepts
from diagnose.datafiles import data_dir
from diagnose.lazyre import lazy
from diagnose.records import record
from diagnose.snapshot import storable
from diagnose.tomlsource import TomlSource, load_toml

__all__ = [
    "ArchFacts",
    "Cause",
    "Fix",
    "FixedIn",
    "Gpu",
    "KnowledgeBase",
    "Reference",
    "load_kb",
    "mask_signature",
]

# --------------------------------------------------------------------------- model


@record
class Fix:
    """One remedy, in the order a user should try them; ``flags``/``env``/``config`` are literal.

    ``for_rules``: rule ids this remedy is specific to. Such a fix is offered only when the
    verdict's rule is one of them, and then before the cause's general fixes (two ranks on one
    GPU need the rank-to-device mapping fixed, not NCCL's transports disabled).
    """

    title: str
    detail: str
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = ()
    for_rules: tuple[str, ...] = ()


@record
class Reference:
    """An upstream thread (``owner/repo#N``) showing the cause, with its normalised error text.

    ``signature`` is the crash's key error text after :func:`mask_signature`
    (numbers, addresses and paths masked), used for "resembles X" similarity.
    """

    id: str
    url: str
    title: str
    signature: str
    cause: str


@record
class FixedIn:
    """First release of ``package`` known to fix (or avoid) the cause."""

    package: str
    version: str
    reference: str
    note: str = ""


@record
class Cause:
    """One root cause: what it is, why it happens, what to do, and how to confirm it."""

    id: str
    title: str
    summary: str
    why: str
    fatal_by_default: bool
    fixes: tuple[Fix, ...]
    references: tuple[Reference, ...]
    fixed_in: tuple[FixedIn, ...] = ()
    verify: tuple[str, ...] = ()
    evidence_to_collect: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    # Causes this one commonly sets off (an illegal memory access makes NCCL's watchdog
    # time out): when both appear in one log, the verdict names this one as the root.
    cascades: tuple[str, ...] = ()
    # A finding of this cause that the program lived through leaves it degraded (no GPU):
    # a later crash that no rule explains is then taken as its consequence, not as unknown.
    explains_later_crashes: bool = False
    # What would decide a verdict of this cause (``unknown``: the generic steps), and what to
    # check when nothing shown ended the process.
    next_steps: tuple[str, ...] = ()
    next_steps_if_survived: tuple[str, ...] = ()
    path: str = ""


@record
class ArchFacts:
    """Limits of one compute capability; byte counts are integers, ``sources`` name each fact."""

    capability: str
    arch: str
    name: str
    smem_per_sm: int
    smem_per_block_optin: int
    smem_reserved_per_block: int
    smem_default_per_block: int
    max_threads_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    variants: tuple[str, ...] = ()
    capability_aliases: tuple[str, ...] = ()
    fp8_mma: bool = False
    fp4_mma: bool = False
    min_cuda: str = ""
    last_cuda: str = ""
    note: str = ""
    sources: tuple[tuple[str, str], ...] = ()
    #: The SM number of ``arch`` (121 for ``sm_121``), derived at load: rules compare a build
    #: target read from the log with it (``numeric = "built_sm != arch.sm"``).
    sm: int = 0

    def source(self, fact: str) -> str | None:
        """Return the source URL recorded for ``fact`` (``"smem"``, ``"registers"``, ...)."""
        return next((url for name, url in self.sources if name == fact), None)


@record
class Gpu:
    """One product as ``nvidia-smi`` / ``torch.cuda.get_device_name`` print it."""

    name: str
    capability: str
    arch: str
    memory_gb: tuple[int, ...]
    aliases: tuple[str, ...] = ()
    source: str = ""
    memory_source: str = ""


@record
class _NameKey:
    """Precomputed match tokens of one product spelling (see :func:`_match_gpu`)."""

    required: frozenset[str]
    optional: frozenset[str]
    gpu: Gpu


@record(slots=False, eq=False)
class KnowledgeBase:
    """All causes and GPU facts, plus lookups.  ``version`` = calver + short content hash."""

    version: str
    causes: tuple[Cause, ...]
    archs: tuple[ArchFacts, ...]
    gpus: tuple[Gpu, ...]
    _name_keys: tuple[_NameKey, ...] = field(default=(), repr=False)
    #: The concept vocabularies of kb/concepts/ (see :mod:`diagnose.concepts`).
    concepts: tuple[Concept, ...] = ()

    def concept_patterns(self) -> dict[str, str]:
        """Each concept's name and alternation, as rule regexes use them (``{{name}}``)."""
        return {c.name: c.pattern for c in self.concepts}

    @property
    def cause_ids(self) -> tuple[str, ...]:
        """Ids of every cause, in file-name order."""
        return tuple(c.id for c in self.causes)

    def cause(self, cause_id: str) -> Cause:
        """Return the cause ``cause_id``; ``KeyError`` naming the known ids when absent."""
        for c in self.causes:
            if c.id == cause_id:
                return c
        raise KeyError(f"unknown cause '{cause_id}' (known: {', '.join(self.cause_ids)})")

    def arch(self, arch_id: str) -> ArchFacts | None:
        """Facts for ``sm_120``, ``sm_120a``, ``SM120``, ``compute_90`` or ``sm_101`` (-> 11.0)."""
        m = _ARCH_ID.match(arch_id.strip().lower())
        if not m:
            return None
        digits = m.group(1)
        for a in self.archs:
            if a.arch == f"sm_{digits}" or f"sm_{digits}" in a.variants:
                return a
        return None

    def arch_for_capability(self, capability: str | tuple[int, int]) -> ArchFacts | None:
        """Facts for a compute capability such as ``"12.0"``, ``"9"`` or ``(8, 6)``."""
        if isinstance(capability, tuple):
            text = f"{capability[0]}.{capability[1]}"
        else:
            text = capability.strip()
            if re.fullmatch(r"\d+", text):
                text += ".0"
        for a in self.archs:
            if text == a.capability or text in a.capability_aliases:
                return a
        return None

    def gpu_for_name(self, name: str) -> Gpu | None:
        """The product a free-form GPU name refers to ("rtx 5090", "H200 (p5en)", "GB10")."""
        return _match_gpu(name, self._name_keys)

    def arch_for_gpu(self, name: str) -> ArchFacts | None:
        """Arch facts for a free-form GPU name; ``None`` when unknown or ambiguous."""
        if _ARCH_ID.match(name.strip().lower()):  # callers sometimes pass "sm_120" here
            return self.arch(name)
        gpu = self.gpu_for_name(name)
        return None if gpu is None else self.arch_for_capability(gpu.capability)

    def nearest_references(
        self, text: str, limit: int = 3, cutoff: float = 0.6
    ) -> list[tuple[Reference, float]]:
        """References whose signature resembles ``text`` (0..1, best first, >= ``cutoff``).

        Scored with rapidfuzz's ``token_set_ratio``, or the same scores from
        :mod:`diagnose.similarity` while a process has not paid for importing rapidfuzz.
        """
        from diagnose.similarity import token_set_ratio, use_rapidfuzz

        fuzz = use_rapidfuzz()
        score = fuzz.token_set_ratio if fuzz is not None else token_set_ratio
        masked = mask_signature(text)
        least = cutoff * 100  # below it both score 0 (and skip the LCS where they can)
        scored = [
            (ref, score(ref.signature, masked, score_cutoff=least) / 100.0)
            for c in self.causes
            for ref in c.references
        ]
        scored = [s for s in scored if s[1] >= cutoff]
        scored.sort(key=lambda s: (-s[1], s[0].id))
        return scored[:limit]


# --------------------------------------------------------------------------- signatures

_HEX = lazy(r"\b0x[0-9a-fA-F]+\b")
# Paths must start with "/", "./", "../", "~/" or a drive letter so "dispatch/combine" survives.
_PATH = lazy(r"(?<![\w<>])(?:[A-Za-z]:\\|~/|\.{1,2}/|/)[^\s:'\"()\[\],;`]+")
# A standalone number: not glued to a word (sm_120, e4m3, 1x2x1, v4.5 keep their digits).
_NUMBER = lazy(r"(?<![\w.<])\d+(?:\.\d+)*(?!\w)(?!\.\d)")


def mask_signature(text: str) -> str:
    """Normalise error text for similarity: mask hex ``<ADDR>``, paths ``<PATH>``, numbers ``<N>``.

    Idempotent, so a stored signature must equal its own mask (checked at load).
    """
    # Literal pre-checks: each pattern needs them, and most signatures lack "0x" or a path.
    out = _HEX.sub("<ADDR>", text) if "0x" in text else text
    out = _PATH.sub("<PATH>", out) if "/" in out or "\\" in out else out
    out = _NUMBER.sub("<N>", out)
    return " ".join(out.split())  # the same as collapsing \s+ and stripping, without a regex


# --------------------------------------------------------------------------- GPU names

_ARCH_ID = lazy(r"^(?:sm_?|compute_?)?(\d{2,3})[a-z]?$")
# Words that never tell two GPUs apart: vendor and brand words, counts, memory sizes,
# form factors.  "NVIDIA H100 80GB HBM3" and "h100" must reduce to the same model token.
_NOISE_WORDS = frozenset({"nvidia", "geforce", "tesla", "gpu", "gpus", "graphics", "card"}) | (
    frozenset({"with", "of", "and", "memory", "the", "x", "on", "a", "an", "vram", "ram", "series"})
)
_NOISE_TOKEN = lazy(
    r"^(?:\d+x|x\d+|\d+(?:\.\d+)?(?:g|gb|gib|m|mb|t|tb)|sxm\d*|pcie|hbm\d*e?|nvl\d*|oam|mig)$"
)
_SPLIT = lazy(r"[^a-z0-9.]+")
_GLUED_BRAND = lazy(r"\b(rtx|gtx|titan)(?=\d)")


def _name_tokens(name: str) -> list[str]:
    """Lowercase model tokens of a GPU name with vendor words, counts and sizes dropped."""
    text = _GLUED_BRAND.sub(r"\1 ", name.lower())
    tokens = [t.strip(".") for t in _SPLIT.split(text)]
    return [t for t in tokens if t and t not in _NOISE_WORDS and not _NOISE_TOKEN.match(t)]


def _name_key(spelling: str, gpu: Gpu) -> _NameKey:
    """Split a product spelling into required tokens (those with digits) and optional words."""
    tokens = _name_tokens(spelling)
    required = frozenset(t for t in tokens if any(ch.isdigit() for ch in t))
    if not required:  # "TITAN V", "Orin", "DGX Spark": every word is required
        return _NameKey(frozenset(tokens), frozenset(), gpu)
    return _NameKey(required, frozenset(tokens) - required, gpu)


def _word_matches(word: str, tokens: Sequence[str]) -> int | None:
    """Position of ``word`` in ``tokens``; long alphabetic words tolerate a typo (rapidfuzz)."""
    if word in tokens:
        return tokens.index(word)
    if len(word) < 5 or not word.isalpha():
        return None
    from diagnose.similarity import ratio  # fuzz.ratio's score, without importing rapidfuzz

    for i, tok in enumerate(tokens):
        if tok.isalpha() and len(tok) >= 5 and ratio(word, tok) >= 85:
            return i
    return None


def _match_gpu(name: str, keys: Sequence[_NameKey]) -> Gpu | None:
    """Pick the product whose model tokens all occur in ``name``; most specific wins.

    Digit-bearing tokens ("4090", "h100", "a6000", "gb10") must match exactly so
    A10/A100, L4/L40 and H20/H200 never blur.  Among candidates the one matching
    the most words wins; several products of one arch tie harmlessly; a tie across
    archs on the same words ("RTX 6000": Quadro, Ada or RTX PRO?) is ambiguous ->
    ``None``, while distinct GPUs named in one string ("GB200 / GB300") resolve to
    the first mentioned.
    """
    tokens = _name_tokens(name)
    if not tokens:
        return None
    best: list[tuple[int, int, int, Gpu]] = []  # (matched, -unmatched, position, gpu)
    for key in keys:
        positions = [_word_matches(w, tokens) for w in key.required]
        if not key.required or any(p is None for p in positions):
            continue
        found = [p for p in positions if p is not None]
        optional_hits = sum(1 for w in key.optional if _word_matches(w, tokens) is not None)
        matched = len(key.required) + optional_hits
        best.append((matched, optional_hits - len(key.optional), min(found), key.gpu))
    if not best:
        return None
    top = max(b[0] for b in best)
    leaders = [b for b in best if b[0] == top]
    first = min(b[2] for b in leaders)
    leaders = [b for b in leaders if b[2] == first]
    if len({b[3].capability for b in leaders}) > 1:
        return None
    return max(leaders, key=lambda b: b[1])[3]


# --------------------------------------------------------------------------- validation

_Check = Callable[[Any], bool]


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_int_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_int(x) for x in v)


def _is_table_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


_TYPE_NAMES: dict[_Check, str] = {
    _is_str: "a string",
    _is_bool: "true or false",
    _is_int: "an integer",
    _is_str_list: "a list of strings",
    _is_int_list: "a list of integers",
    _is_table_list: "an array of tables ([[...]])",
}

# field -> (type check, required)
_Spec = dict[str, tuple[_Check, bool]]

_CAUSE_SPEC: _Spec = {
    "id": (_is_str, True),
    "title": (_is_str, True),
    "summary": (_is_str, True),
    "why": (_is_str, True),
    "fatal_by_default": (_is_bool, True),
    "verify": (_is_str_list, True),
    "evidence_to_collect": (_is_str_list, True),
    "related": (_is_str_list, False),
    "cascades": (_is_str_list, False),
    "explains_later_crashes": (_is_bool, False),
    "next_steps": (_is_str_list, False),
    "next_steps_if_survived": (_is_str_list, False),
    "fixes": (_is_table_list, True),
    "references": (_is_table_list, True),
    "fixed_in": (_is_table_list, False),
}
_FIX_SPEC: _Spec = {
    "title": (_is_str, True),
    "detail": (_is_str, True),
    "flags": (_is_str_list, False),
    "env": (_is_str_list, False),
    "config": (_is_str_list, False),
    "applies_to": (_is_str_list, False),
    "for_rules": (_is_str_list, False),
}
_REF_SPEC: _Spec = {
    "id": (_is_str, True),
    "url": (_is_str, True),
    "title": (_is_str, True),
    "signature": (_is_str, True),
}
_FIXED_IN_SPEC: _Spec = {
    "package": (_is_str, True),
    "version": (_is_str, True),
    "reference": (_is_str, True),
    "note": (_is_str, False),
}
_ARCH_SPEC: _Spec = {
    "capability": (_is_str, True),
    "arch": (_is_str, True),
    "name": (_is_str, True),
    "smem_per_sm": (_is_int, True),
    "smem_per_block_optin": (_is_int, True),
    "smem_reserved_per_block": (_is_int, True),
    "smem_default_per_block": (_is_int, True),
    "max_threads_per_sm": (_is_int, True),
    "registers_per_sm": (_is_int, True),
    "max_registers_per_thread": (_is_int, True),
    "variants": (_is_str_list, False),
    "capability_aliases": (_is_str_list, False),
    "fp8_mma": (_is_bool, True),
    "fp4_mma": (_is_bool, True),
    "min_cuda": (_is_str, False),
    "last_cuda": (_is_str, False),
    "note": (_is_str, False),
}
# Every [[arch]] fact carries its own source URL as `source_<fact>`; these four are required.
_ARCH_SOURCED = ("smem", "threads", "registers", "products")
_ARCH_SPEC.update({f"source_{k}": (_is_str, True) for k in _ARCH_SOURCED})
_ARCH_SPEC.update({f"source_{k}": (_is_str, False) for k in ("fp8", "fp4", "cuda")})
_GPU_SPEC: _Spec = {
    "name": (_is_str, True),
    "capability": (_is_str, True),
    "memory_gb": (_is_int_list, True),
    "aliases": (_is_str_list, False),
    "source": (_is_str, True),
    "memory_source": (_is_str, True),
}
_GPUS_FILE_SPEC: _Spec = {"arch": (_is_table_list, False), "gpu": (_is_table_list, False)}
_META_SPEC: _Spec = {"version": (_is_str, True), "note": (_is_str, False)}

_CAUSE_ID = lazy(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_REF_ID = lazy(r"^([A-Za-z0-9_.\-]+)/([A-Za-z0-9_.\-]+)#(\d+)$")
_REF_URL = lazy(r"^https://github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)/?$")
_URL = lazy(r"^https?://\S+$")
_CALVER = lazy(r"^\d{4}\.\d{2}\.\d{2}$")
_CAPABILITY = lazy(r"^\d{1,2}\.\d$")
_SM = lazy(r"^sm_\d{2,3}[a-z]?$")
# Upper-case names, but Ray reads mixed-case ones (RAY_memory_usage_threshold).
_ENV = lazy(r"^[A-Z][A-Za-z0-9_]*(?:=.*)?$")
_MAX_SIGNATURE = 160


def _check_table(src: TomlSource, table: dict[str, Any], spec: _Spec, prefix: str) -> None:
    """Reject unknown fields, missing required fields, wrong types and empty strings."""
    for key in table:
        if key not in spec:
            known = ", ".join(sorted(spec))
            raise src.error(f"{prefix}{key}", f"unknown field (expected one of: {known})")
    for key, (check, required) in spec.items():
        path = f"{prefix}{key}"
        if key not in table:
            if required:
                raise src.error(path, "missing required field")
            continue
        value = table[key]
        if not check(value):
            raise src.error(path, f"must be {_TYPE_NAMES[check]}, got {type(value).__name__}")
        if check is _is_str and required and not value.strip():
            raise src.error(path, "must not be empty")


def _strs(table: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(table.get(key, ()))


def _parse_reference(src: TomlSource, raw: dict[str, Any], prefix: str, cause: str) -> Reference:
    _check_table(src, raw, _REF_SPEC, prefix)
    ref_id, url, sig = raw["id"], raw["url"], raw["signature"]
    m = _REF_ID.match(ref_id)
    if not m:
        raise src.error(f"{prefix}id", f"'{ref_id}' is not of the form owner/repo#number")
    u = _REF_URL.match(url)
    if not u or (u.group(1).lower(), u.group(2).lower(), u.group(3)) != (
        m.group(1).lower(),
        m.group(2).lower(),
        m.group(3),
    ):
        raise src.error(f"{prefix}url", f"does not point at {ref_id} on github.com")
    if len(sig) > _MAX_SIGNATURE:
        raise src.error(f"{prefix}signature", f"longer than {_MAX_SIGNATURE} characters")
    if mask_signature(sig) != sig:
        raise src.error(
            f"{prefix}signature",
            f"not normalised; write it as: {mask_signature(sig)!r}",
        )
    return Reference(ref_id, url, raw["title"], sig, cause)


def _parse_fix(src: TomlSource, raw: dict[str, Any], prefix: str) -> Fix:
    _check_table(src, raw, _FIX_SPEC, prefix)
    for i, flag in enumerate(raw.get("flags", ())):
        if not flag.startswith("-"):
            raise src.error(f"{prefix}flags[{i}]", f"'{flag}' is not a command-line flag")
    for i, env in enumerate(raw.get("env", ())):
        if not _ENV.match(env):
            raise src.error(f"{prefix}env[{i}]", f"'{env}' is not NAME or NAME=value")
    return Fix(
        raw["title"],
        raw["detail"],
        _strs(raw, "flags"),
        _strs(raw, "env"),
        _strs(raw, "config"),
        _strs(raw, "applies_to"),
        _strs(raw, "for_rules"),
    )


def _parse_fixed_in(src: TomlSource, raw: dict[str, Any], prefix: str) -> FixedIn:
    _check_table(src, raw, _FIXED_IN_SPEC, prefix)
    ref = raw["reference"]
    if not (_REF_ID.match(ref) or _URL.match(ref)):
        raise src.error(f"{prefix}reference", f"'{ref}' is neither owner/repo#number nor a URL")
    return FixedIn(raw["package"], raw["version"], ref, raw.get("note", ""))


def _parse_cause(path: Path) -> Cause:
    src = load_toml(path)
    data = src.data
    _check_table(src, data, _CAUSE_SPEC, "")
    cause_id = data["id"]
    if not _CAUSE_ID.match(cause_id):
        raise src.error("id", f"'{cause_id}' must be lowercase words joined by '-'")
    if cause_id != path.stem:
        raise src.error("id", f"'{cause_id}' differs from the file name '{path.stem}'")
    for key in ("fixes", "references"):
        if not data[key]:
            raise src.error(key, "needs at least one entry")
    fixes = tuple(_parse_fix(src, f, f"fixes[{i}].") for i, f in enumerate(data["fixes"]))
    refs: list[Reference] = []
    for i, raw in enumerate(data["references"]):
        ref = _parse_reference(src, raw, f"references[{i}].", cause_id)
        if any(r.id == ref.id for r in refs):
            raise src.error(f"references[{i}].id", f"duplicate reference '{ref.id}'")
        refs.append(ref)
    fixed = tuple(
        _parse_fixed_in(src, f, f"fixed_in[{i}].") for i, f in enumerate(data.get("fixed_in", ()))
    )
    return Cause(
        id=cause_id,
        title=data["title"],
        summary=data["summary"],
        why=data["why"],
        fatal_by_default=data["fatal_by_default"],
        fixes=fixes,
        references=tuple(refs),
        fixed_in=fixed,
        verify=_strs(data, "verify"),
        evidence_to_collect=_strs(data, "evidence_to_collect"),
        related=_strs(data, "related"),
        cascades=_strs(data, "cascades"),
        explains_later_crashes=bool(data.get("explains_later_crashes", False)),
        next_steps=_strs(data, "next_steps"),
        next_steps_if_survived=_strs(data, "next_steps_if_survived"),
        path=str(path),
    )


def _parse_arch(src: TomlSource, raw: dict[str, Any], prefix: str) -> ArchFacts:
    _check_table(src, raw, _ARCH_SPEC, prefix)
    if not _CAPABILITY.match(raw["capability"]):
        raise src.error(f"{prefix}capability", "must look like '12.0'")
    for i, alias in enumerate(raw.get("capability_aliases", ())):
        if not _CAPABILITY.match(alias):
            raise src.error(f"{prefix}capability_aliases[{i}]", "must look like '10.1'")
    if not _SM.match(raw["arch"]):
        raise src.error(f"{prefix}arch", "must look like 'sm_120'")
    for i, variant in enumerate(raw.get("variants", ())):
        if not _SM.match(variant):
            raise src.error(f"{prefix}variants[{i}]", "must look like 'sm_120a'")
    for key, (check, _) in _ARCH_SPEC.items():
        if check is _is_int and raw[key] <= 0:
            if key == "smem_reserved_per_block" and raw[key] == 0:
                continue  # no per-block reserve before CC 8.0
            raise src.error(f"{prefix}{key}", "must be positive")
    if raw["smem_per_block_optin"] > raw["smem_per_sm"]:
        raise src.error(f"{prefix}smem_per_block_optin", "exceeds smem_per_sm")
    sources: dict[str, str] = {}
    for key, value in raw.items():
        if key.startswith("source_"):
            if not _URL.match(value):
                raise src.error(f"{prefix}{key}", "must be an http(s) URL")
            sources[key.removeprefix("source_")] = value
    return ArchFacts(
        capability=raw["capability"],
        arch=raw["arch"],
        name=raw["name"],
        smem_per_sm=raw["smem_per_sm"],
        smem_per_block_optin=raw["smem_per_block_optin"],
        smem_reserved_per_block=raw["smem_reserved_per_block"],
        smem_default_per_block=raw["smem_default_per_block"],
        max_threads_per_sm=raw["max_threads_per_sm"],
        registers_per_sm=raw["registers_per_sm"],
        max_registers_per_thread=raw["max_registers_per_thread"],
        variants=_strs(raw, "variants"),
        capability_aliases=_strs(raw, "capability_aliases"),
        fp8_mma=raw["fp8_mma"],
        fp4_mma=raw["fp4_mma"],
        min_cuda=raw.get("min_cuda", ""),
        last_cuda=raw.get("last_cuda", ""),
        note=raw.get("note", ""),
        sources=tuple(sorted(sources.items())),
        sm=int(raw["arch"].removeprefix("sm_")),
    )


def _parse_gpu(src: TomlSource, raw: dict[str, Any], prefix: str, archs: dict[str, str]) -> Gpu:
    _check_table(src, raw, _GPU_SPEC, prefix)
    cap = raw["capability"]
    if cap not in archs:
        raise src.error(f"{prefix}capability", f"no [[arch]] entry with capability '{cap}'")
    if not raw["memory_gb"] or any(m <= 0 for m in raw["memory_gb"]):
        raise src.error(f"{prefix}memory_gb", "needs positive sizes in GB")
    for key in ("source", "memory_source"):
        if not _URL.match(raw[key]):
            raise src.error(f"{prefix}{key}", "must be an http(s) URL")
    if not _name_tokens(raw["name"]):
        raise src.error(f"{prefix}name", "has no model token left after dropping vendor words")
    return Gpu(
        name=raw["name"],
        capability=cap,
        arch=archs[cap],
        memory_gb=tuple(raw["memory_gb"]),
        aliases=_strs(raw, "aliases"),
        source=raw["source"],
        memory_source=raw["memory_source"],
    )


def _parse_gpus(path: Path, archs: list[ArchFacts], gpus: list[Gpu], seen: dict[str, str]) -> None:
    """Append the [[arch]] and [[gpu]] entries of ``path``; ``seen`` tracks names across files."""
    src = load_toml(path)
    _check_table(src, src.data, _GPUS_FILE_SPEC, "")
    for i, raw in enumerate(src.data.get("arch", ())):
        arch = _parse_arch(src, raw, f"arch[{i}].")
        for key in (arch.capability, arch.arch, *arch.capability_aliases, *arch.variants):
            if key in seen:
                raise src.error(f"arch[{i}].capability", f"'{key}' already defined in {seen[key]}")
            seen[key] = str(path)
        archs.append(arch)
    by_cap = {a.capability: a.arch for a in archs}
    for i, raw in enumerate(src.data.get("gpu", ())):
        gpu = _parse_gpu(src, raw, f"gpu[{i}].", by_cap)
        for spelling in (gpu.name, *gpu.aliases):
            key = "gpu:" + " ".join(_name_tokens(spelling))
            if key in seen:
                where = f"gpu[{i}].name" if spelling == gpu.name else f"gpu[{i}].aliases"
                raise src.error(where, f"'{spelling}' already defined in {seen[key]}")
            seen[key] = str(path)
        gpus.append(gpu)


def _content_hash(dirs: Iterable[Path]) -> str:
    """Short SHA-256 over every ``*.toml`` under ``dirs`` (relative path + bytes), sorted."""
    import hashlib  # only at load time: keeps `import diagnose.kb` cheap

    digest = hashlib.sha256()
    for root in dirs:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.toml")):
            digest.update(p.relative_to(root).as_posix().encode())
            digest.update(b"\0")
            digest.update(p.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:12]


def _read_meta(path: Path) -> str:
    src = load_toml(path)
    _check_table(src, src.data, _META_SPEC, "")
    version = src.data["version"]
    if not _CALVER.match(version):
        raise src.error("version", f"'{version}' is not a calendar version like 2026.12.02")
    return str(version)


def _build(root: Path, extra_dirs: Sequence[Path], rules_dir: Path | None) -> KnowledgeBase:
    """Parse and cross-check ``root`` plus ``extra_dirs`` into one :class:`KnowledgeBase`."""
    version = _read_meta(root / "meta.toml")
    causes: list[Cause] = []
    seen_causes: dict[str, str] = {}
    archs: list[ArchFacts] = []
    gpus: list[Gpu] = []
    seen_gpu: dict[str, str] = {}
    for base in (root, *extra_dirs):
        for path in sorted((base / "causes").glob("*.toml")):
            cause = _parse_cause(path)
            if cause.id in seen_causes:
                raise load_toml(path).error(
                    "id", f"duplicate cause '{cause.id}' (also in {seen_causes[cause.id]})"
                )
            seen_causes[cause.id] = str(path)
            causes.append(cause)
        if (base / "gpus.toml").is_file():
            _parse_gpus(base / "gpus.toml", archs, gpus, seen_gpu)
    for cause in causes:
        for i, rel in enumerate(cause.related):
            if rel not in seen_causes:
                raise load_toml(Path(cause.path)).error(f"related[{i}]", f"no cause '{rel}'")
        for i, rel in enumerate(cause.cascades):
            if rel not in seen_causes or rel == cause.id:
                raise load_toml(Path(cause.path)).error(f"cascades[{i}]", f"no cause '{rel}'")
    hashed = [root, *extra_dirs] + ([rules_dir] if rules_dir else [])
    keys = tuple(_name_key(spelling, g) for g in gpus for spelling in (g.name, *g.aliases))
    # Products as logs shorten them ("RTX 5090", "H100"), and families ("Blackwell").
    products = {" ".join(_name_tokens(s)) for g in gpus for s in (g.name, *g.aliases)}
    families = {a.name.split(" (")[0] for a in archs}
    concepts = parse_concepts((root, *extra_dirs), sorted(products - {""}), sorted(families))
    return KnowledgeBase(
        version=f"{version}+{_content_hash(hashed)}",
        causes=tuple(causes),
        archs=tuple(archs),
        gpus=tuple(gpus),
        _name_keys=keys,
        concepts=concepts,
    )


def _rules_dir() -> Path | None:
    try:
        return data_dir("rules")
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=4)
def _default_kb(extra: tuple[Path, ...] = ()) -> KnowledgeBase:
    """The shipped kb (plus ``DIAGNOSE_KB_PATH``'s folders): from the on-disk snapshot when
    no input or code changed since."""
    from diagnose import snapshot

    root, rules_dir = data_dir("kb"), _rules_dir()
    # The version hashes the rules dir too, so its files are part of the key.
    key = (
        "kb",
        snapshot.code_stamp(),
        snapshot.stamps([root, *extra, *([rules_dir] if rules_dir else [])]),
    )
    cached = snapshot.load(key)
    if isinstance(cached, KnowledgeBase):
        return cached
    kb = _build(root, extra, rules_dir)
    snapshot.save(key, kb)
    return kb


def load_kb(extra_dirs: Sequence[Path] = (), *, root: Path | None = None) -> KnowledgeBase:
    """Load and validate the knowledge base; the shipped one is parsed once and cached.

    ``extra_dirs`` are further folders laid out like ``kb/`` (``causes/*.toml``,
    optional ``gpus.toml``, ``concepts/``) whose entries are added, after those the
    ``DIAGNOSE_KB_PATH`` environment variable names; ``root`` replaces the shipped
    ``kb/`` folder.  Raises :class:`RuleFileError` naming file, line and field.
    """
    from diagnose.vocab import kb_dirs

    env = kb_dirs()[1:]
    if not extra_dirs and root is None:
        return _default_kb(env)
    extra_dirs = (*env, *extra_dirs)
    return _build(root or data_dir("kb"), tuple(extra_dirs), _rules_dir())


storable(Fix, Reference, FixedIn, Cause, ArchFacts, Gpu, _NameKey, KnowledgeBase)


def version_line(prog: str) -> str:
    """``PROG (crashkb) VERSION, kb KB_VERSION``: what ``--version`` prints for each command.

    The package version has one source (``diagnose.__version__``); the rule-base version is
    read here, and a broken kb still gives a line that says so.
    """
    from diagnose import __version__

    try:
        kb = f"kb {load_kb().version}"
    except Exception as exc:  # the version must print even with a broken kb
        kb = f"kb unreadable ({exc})"
    return f"{prog} (crashkb) {__version__}, {kb}"
