"""crashkb: name the root cause of GPU / LLM-serving crash logs.

Public API (imported lazily so ``import diagnose`` stays cheap)::

    from diagnose import diagnose_text, diagnose_file, demangle, parse_name

    d = diagnose_file("crash.log")
    d.cause, d.fatal, d.confidence, d.primary.evidence, d.fixes
    d.to_dict()        # the documented JSON contract

Results are frozen dataclasses (:class:`Diagnosis`, :class:`Region`,
:class:`Frame`, :class:`Finding`); the library never prints or exits.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "diagnose_text": "diagnose.api",
    "diagnose_file": "diagnose.api",
    "iter_diagnoses": "diagnose.stream",
    "demangle": "diagnose.frames.demangle",
    "parse_name": "diagnose.frames.names",
    "kernel_facts": "diagnose.frames.vocab",
    "parse_frame": "diagnose.frames.dialects",
    "normalize": "diagnose.ingest.normalize",
    "find_regions": "diagnose.regions",
    "Diagnosis": "diagnose.report",
    "FixAdvice": "diagnose.report",
    "SimilarCase": "diagnose.report",
    "Finding": "diagnose.model",
    "Evidence": "diagnose.model",
    "Frame": "diagnose.model",
    "Region": "diagnose.model",
    "LogLine": "diagnose.model",
    "ParsedName": "diagnose.model",
    "TemplateArg": "diagnose.model",
    "KernelFacts": "diagnose.model",
    "DiagnoseError": "diagnose.errors",
    "InputError": "diagnose.errors",
    "RuleFileError": "diagnose.errors",
}

__all__ = [
    "DiagnoseError",
    "Diagnosis",
    "Evidence",
    "Finding",
    "FixAdvice",
    "Frame",
    "InputError",
    "KernelFacts",
    "LogLine",
    "ParsedName",
    "Region",
    "RuleFileError",
    "SimilarCase",
    "TemplateArg",
    "demangle",
    "diagnose_file",
    "diagnose_text",
    "find_regions",
    "iter_diagnoses",
    "kernel_facts",
    "normalize",
    "parse_frame",
    "parse_name",
]

if TYPE_CHECKING:
    from diagnose.api import diagnose_file, diagnose_text
    from diagnose.errors import DiagnoseError, InputError, RuleFileError
    from diagnose.frames.demangle import demangle
    from diagnose.frames.dialects import parse_frame
    from diagnose.frames.names import parse_name
    from diagnose.frames.vocab import kernel_facts
    from diagnose.ingest.normalize import normalize
    from diagnose.model import (
        Evidence,
        Finding,
        Frame,
        KernelFacts,
        LogLine,
        ParsedName,
        Region,
        TemplateArg,
    )
    from diagnose.regions import find_regions
    from diagnose.report import Diagnosis, FixAdvice, SimilarCase
    from diagnose.stream import iter_diagnoses


def __getattr__(name: str) -> Any:
    """Import public names on first use (PEP 562) so the CLI starts fast."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'diagnose' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
