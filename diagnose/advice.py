"""Fixes phrased for the engine in the log: its flags only, never the part that failed.

The knowledge base words a fix once for every engine ("raise the static memory fraction:
``--mem-fraction-static 0.88`` / ``--gpu-memory-utilization 0.95``).  A user of one engine
must see only the flags their engine accepts, so each serving engine's catalogue of flags
and environment-variable prefixes is data (``kb/stacks.toml``, ``engine = true``) and this
module filters each fix through it:

* the log's engine is the engine stack the log shows, the crash region's first when there
  are several; an engine another one embeds (SGLang imports vLLM) is not the log's engine
  when the embedding one is there too;
* a flag or engine variable is kept only when the log's engine owns it (its catalogue, or
  one it ``inherits``), and its ``since``/``until`` releases admit the version the log shows;
* with no engine in the log, engine flags are left out and a note says so: the advice is
  then the engine-neutral part of each fix;
* a flag whose value names a stack the crash region shows (``--attention-backend triton``
  when a Triton kernel failed) is left out: never recommend the component that failed;
* ``{capability}``, ``{sm}`` and ``{arch}`` in a fix are filled from the GPU the log shows,
  or say to look it up: never assume a GPU the log does not show.

A fix whose every flag, variable and setting was filtered out is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any

from diagnose.datafiles import data_dir
from diagnose.records import record
from diagnose.snapshot import storable
from diagnose.tomlsource import load_toml

__all__ = ["Catalogue", "Tailored", "catalogues", "engines_in", "tailor"]

#: What a fix says in place of a GPU fact the log does not show.
UNKNOWN_CAPABILITY = (
    "<your GPU's compute capability: nvidia-smi --query-gpu=compute_cap --format=csv>"
)
_PLACEHOLDER = re.compile(r"\{(capability|sm|arch)\}")
_VALUE_WORD = re.compile(r"[a-z0-9][a-z0-9._-]*")


@record
class Catalogue:
    """One serving engine's flags and environment-variable prefixes."""

    engine: str
    flags: frozenset[str]
    env_prefixes: tuple[str, ...] = ()
    embeds: frozenset[str] = frozenset()
    since: Mapping[str, str] = field(default_factory=dict)
    until: Mapping[str, str] = field(default_factory=dict)
    versions: str = ""


@record
class Tailored:
    """The fixes as the log's engine reads them, and a note when no engine was seen."""

    fixes: tuple[Any, ...]
    engine: str | None
    note: str = ""


@lru_cache(maxsize=1)
def catalogues() -> Mapping[str, Catalogue]:
    """The engine catalogues of ``kb/stacks.toml`` (validated; an error names file and line).

    Read back from the snapshot while neither the file nor this module changed.
    """
    from diagnose.snapshot import memo

    path = data_dir("kb") / "stacks.toml"
    return memo("engines", (path, Path(__file__)), lambda: _read(path))


def _read(path: Path) -> Mapping[str, Catalogue]:
    src = load_toml(path)
    table: dict[str, Any] = src.data.get("stacks", {})
    raw: dict[str, dict[str, Any]] = {}
    for stack, spec in table.items():
        if not isinstance(spec, dict) or not spec.get("engine"):
            continue
        for key in ("flags", "env_prefixes", "embeds"):
            value = spec.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise src.error(f"stacks.{stack}.{key}", "expected a list of strings")
        for i, flag in enumerate(spec.get("flags", [])):
            if not flag.startswith("-"):
                raise src.error(f"stacks.{stack}.flags[{i}]", f"'{flag}' is not a flag")
        for key in ("since", "until"):
            for flag in spec.get(key, {}):
                if flag not in spec.get("flags", []):
                    raise src.error(f"stacks.{stack}.{key}", f"'{flag}' is not in flags")
        raw[stack] = spec
    out: dict[str, Catalogue] = {}
    for stack, spec in raw.items():
        parent = spec.get("inherits")
        if parent is not None and parent not in raw:
            raise src.error(f"stacks.{stack}.inherits", f"no engine '{parent}'")
        base = raw.get(parent, {}) if parent else {}
        out[stack] = Catalogue(
            engine=stack,
            flags=frozenset(spec.get("flags", [])) | frozenset(base.get("flags", [])),
            env_prefixes=tuple(spec.get("env_prefixes", [])) + tuple(base.get("env_prefixes", [])),
            embeds=frozenset(spec.get("embeds", [])) | frozenset(base.get("embeds", [])),
            since={**base.get("since", {}), **spec.get("since", {})},
            until={**base.get("until", {}), **spec.get("until", {})},
            versions=str(spec.get("versions", base.get("versions", ""))),
        )
    return out


def engines_in(stacks: Iterable[str], known: Mapping[str, Catalogue] | None = None) -> list[str]:
    """The engines among ``stacks``, less those another engine there embeds."""
    cats = catalogues() if known is None else known
    found = [s for s in stacks if s in cats]
    embedded = {e for s in found for e in cats[s].embeds}
    return sorted(s for s in found if s not in embedded)


def _owners(item: str, is_env: bool, cats: Mapping[str, Catalogue]) -> set[str]:
    """The engines that own a flag (``--name value``) or an environment variable."""
    if is_env:
        name = item.split("=", 1)[0]
        return {c.engine for c in cats.values() if any(name.startswith(p) for p in c.env_prefixes)}
    name = item.split()[0].split("=", 1)[0]
    return {c.engine for c in cats.values() if name in c.flags}


_KWARG = re.compile(r"^([a-z][a-z0-9_]*)=")


def _as_flag(setting: str) -> str:
    """A setting as the flag it stands for: ``--x`` as is, ``gpu_memory_utilization=0.9`` as
    ``--gpu-memory-utilization 0.9`` (engines name keyword arguments after their flags)."""
    m = _KWARG.match(setting)
    if m is None:
        return setting if setting.startswith("-") else ""
    return "--" + m.group(1).replace("_", "-") + " " + setting[m.end() :]


def _names_failed_part(flag: str, failed: frozenset[str]) -> bool:
    """True when the flag's value names a stack the crash region shows."""
    value = flag.split(None, 1)[1] if " " in flag else flag.partition("=")[2]
    return any(word in failed for word in _VALUE_WORD.findall(value.lower()))


def _admitted(flag: str, engine: str, version: str | None, cats: Mapping[str, Catalogue]) -> bool:
    """The flag exists in the engine release the log shows (unknown release: yes)."""
    cat, name = cats[engine], flag.split()[0]
    since, until = cat.since.get(name), cat.until.get(name)
    if version is None or (since is None and until is None):
        return True
    from diagnose.versions import is_before  # ~2 ms: only for a flag with a release range

    if since is not None and is_before(version, since) is True:
        return False
    return not (until is not None and is_before(version, until) is False)


def _fill(text: str, gpu: Mapping[str, str]) -> str:
    """Put the log's GPU facts into ``{capability}``/``{sm}``/``{arch}``, or say to look them up."""
    if "{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: gpu.get(m.group(1), UNKNOWN_CAPABILITY), text)


def tailor(
    fixes: Sequence[Any],
    region: frozenset[str],
    log: frozenset[str],
    *,
    versions: Mapping[str, str] | None = None,
    gpu: Mapping[str, str] | None = None,
    known: Mapping[str, Catalogue] | None = None,
) -> Tailored:
    """Filter and fill ``fixes`` (objects with ``flags``, ``env``, ``config``) for the log.

    ``region`` / ``log``: stack ids the crash region and the whole log show.  ``versions``:
    package versions the log shows.  ``gpu``: ``capability`` ("12.0"), ``sm`` ("120") and
    ``arch`` ("sm_120") of the log's GPU, when it shows one.
    """
    from dataclasses import replace

    cats = catalogues() if known is None else known
    # Embedding is judged over the whole log (an SGLang log's crash region may show only the
    # TensorRT-LLM kernels FlashInfer ships); among what is left, the region's engine wins.
    present = engines_in(region | log, cats)
    engines = [e for e in present if e in region] or present
    engine = engines[0] if len(engines) == 1 else None
    facts = gpu or {}
    versions = versions or {}
    out: list[Any] = []
    dropped_for_no_engine = False
    for fix in fixes:

        def keep(item: str, is_env: bool) -> bool:
            nonlocal dropped_for_no_engine
            if not item:
                return True  # a plain setting or command: every engine's
            owners = _owners(item, is_env, cats)
            if not is_env and _names_failed_part(item, region):
                return False
            if not owners:
                return True  # not an engine's: generic (NCCL_*, PYTORCH_*, torch settings)
            usable = owners.intersection(engines)
            if not usable:
                dropped_for_no_engine = dropped_for_no_engine or not engines
                return False
            return is_env or any(_admitted(item, e, versions.get(e), cats) for e in usable)

        flags = tuple(_fill(f, facts) for f in fix.flags if keep(f, False))
        env = tuple(_fill(e, facts) for e in fix.env if keep(e, True))
        config = tuple(_fill(c, facts) for c in fix.config if keep(_as_flag(c), False))
        had = bool(fix.flags or fix.env or fix.config)
        if had and not (flags or env or config) and engines:
            continue  # everything it said was for another engine (or the failed part)
        out.append(replace(fix, flags=flags, env=env, config=config))
    note = ""
    if dropped_for_no_engine:
        note = (
            "The log does not show which serving engine ran, so engine flags are left out "
            "of the fixes; paste the launch command for engine-specific advice."
        )
    return Tailored(tuple(out), engine, note)


storable(Catalogue)
