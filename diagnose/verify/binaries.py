"""What a CUDA binary on disk carries: SASS archs, PTX targets and kernel names.

The most common Blackwell failure is a kernel not built for the GPU it runs on, and the
evidence is the ``.so`` or cubin the crash's frames name.  :func:`read_binary` opens it as an
ELF (pyelftools), walks the fatbin containers of its ``.nv_fatbin`` section and lists, per
entry, the SASS arch (``sm_90a``) or PTX target (``compute_90``) and, for an uncompressed
cubin, the kernels it holds (its ``.text.<name>`` sections).  :func:`runs_on` then says
whether that code can run on a given GPU arch: SASS of the same major version and an equal
or lower minor one, or PTX of an equal or lower target the driver can JIT; an arch-specific
build (``sm_90a``, ``sm_120a``) only on exactly that arch.

Everything is bounded: a section, a container and an entry may not claim more bytes than
hold them, at most :data:`MAX_ENTRIES` entries are read, a file over
:data:`MAX_HASHED_BYTES` is not hashed, and anything malformed ends the walk with a note
instead of an exception.

The fatbin layout (a 16-byte container header: magic ``0xBA55ED50``, version, header size,
payload size; then entries with a kind, 1 PTX or 2 ELF, a header size, a padded payload size,
the arch number at byte 28 and flags at byte 40, ``0x100000`` marking an arch-specific
build) is NVIDIA's, read here the way ``cuobjdump --list-elf --list-ptx`` lists it.  Where
``cuobjdump`` is on ``PATH``, :func:`cross_check` runs it on the same file and notes whether
its list agrees with this reader's (bounded by :data:`CUOBJDUMP_TIMEOUT`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from diagnose.records import record

__all__ = ["BinaryReport", "cross_check", "read_binary", "runs_on"]

FATBIN_MAGIC = 0xBA55ED50
#: The most fatbin entries read from one binary (a fat library holds a few hundred).
MAX_ENTRIES = 4096
#: A ``.nv_fatbin`` section larger than this is not read (the largest real ones are ~1 GiB).
MAX_SECTION_BYTES = 1 << 30
#: Files larger than this are described but not hashed (hashing would take seconds).
MAX_HASHED_BYTES = 512 << 20
#: Seconds cuobjdump may take on one file (a fat library of a few hundred MB lists in ~1 s).
CUOBJDUMP_TIMEOUT = 20.0
_KIND_PTX, _KIND_ELF = 1, 2
# "ELF file    1: libx.1.sm_90a.cubin", "PTX file    1: libx.1.sm_90.ptx"
_CUOBJDUMP_ENTRY = re.compile(
    r"^(ELF|PTX) file\s+\d+: \S*?\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$", re.M
)
_ARCH_SPECIFIC = 0x100000
_COMPRESSED = 0x2000 | 0x8000  # either bit: the payload is not plain text/ELF


@record
class BinaryReport:
    """One CUDA binary: where it is, its hash, and the device code it carries."""

    path: str
    size: int
    sha256: str | None
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (``verification.binaries[]``)."""
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "sass": list(self.sass),
            "ptx": list(self.ptx),
            "kernels_found": list(self.kernels),
            "notes": list(self.notes),
        }


def read_binary(path: str | os.PathLike[str]) -> BinaryReport:
    """Describe the device code of the ELF at ``path`` (never raises for its content)."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        return BinaryReport(str(p), 0, None, notes=(f"cannot read: {exc.strerror or exc}",))
    notes: list[str] = []
    digest = _sha256(p, size, notes)
    try:
        sections = _fatbin_sections(p, notes)
    except Exception as exc:  # pyelftools raises several types on a malformed ELF
        notes.append(f"not a readable ELF file ({type(exc).__name__}: {exc})")
        return BinaryReport(str(p), size, digest, notes=tuple(notes))
    sass: list[str] = []
    ptx: list[str] = []
    kernels: list[str] = []
    for data in sections:
        _walk(data, sass, ptx, kernels, notes)
    if not sections:
        notes.append("no .nv_fatbin section: this file carries no CUDA device code")
    return BinaryReport(
        str(p),
        size,
        digest,
        tuple(dict.fromkeys(sass)),
        tuple(dict.fromkeys(ptx)),
        tuple(dict.fromkeys(kernels)),
        tuple(dict.fromkeys(notes)),
    )


@functools.cache
def find_cuobjdump() -> str | None:
    """``cuobjdump`` on ``PATH`` (a CUDA toolkit), else the one NVIDIA ships as a Python wheel
    (``pip install nvidia-cuda-cuobjdump``: ``nvidia/cu<N>/bin/cuobjdump`` in site-packages,
    no toolkit needed), else ``None``.  Looked up once a process: every binary of a log is
    cross-checked with the same tool."""
    found = shutil.which("cuobjdump")
    if found is not None:
        return found
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        for tool in sorted(Path(root).glob("cu*/bin/cuobjdump"), reverse=True):  # newest CUDA
            if os.access(tool, os.X_OK):
                return str(tool)
    return None


def cross_check(report: BinaryReport, cuobjdump: str | None = None) -> BinaryReport:
    """``report`` with a note on whether ``cuobjdump --list-elf --list-ptx`` lists the same
    SASS and PTX; unchanged when no cuobjdump is found (:func:`find_cuobjdump`)."""
    tool = cuobjdump or find_cuobjdump()
    if tool is None or not (report.sass or report.ptx or report.sha256):
        return report
    try:
        done = subprocess.run(
            [tool, "--list-elf", "--list-ptx", report.path],
            capture_output=True,
            text=True,
            timeout=CUOBJDUMP_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return _noted(report, f"cuobjdump could not list it ({type(exc).__name__})")
    sass: set[str] = set()
    ptx: set[str] = set()
    for kind, arch in _CUOBJDUMP_ENTRY.findall(done.stdout):
        (sass if kind == "ELF" else ptx).add(arch if kind == "ELF" else "compute_" + arch[3:])
    if done.returncode != 0 and not (sass or ptx):
        why = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return _noted(report, f"cuobjdump lists no device code ({why})")
    if (sass, ptx) == (set(report.sass), set(report.ptx)):
        return _noted(report, "cuobjdump --list-elf --list-ptx agrees")
    listed = ", ".join(sorted(sass | ptx)) or "nothing"
    return _noted(
        report,
        f"cuobjdump lists {listed}; this reader found "
        f"{', '.join((*report.sass, *report.ptx)) or 'nothing'}",
    )


def _noted(report: BinaryReport, note: str) -> BinaryReport:
    from dataclasses import replace

    return replace(report, notes=(*report.notes, note))


def runs_on(report: BinaryReport, arch: str) -> str | None:
    """``"sass"`` or ``"ptx"`` when the binary has code that runs on GPU ``arch``, else None.

    ``arch`` is ``sm_120``-style (an ``a`` suffix is ignored: the GPU is what it is).
    """
    gpu = _parse(arch)
    if gpu is None:
        return None
    major, minor = gpu[0]
    for target in report.sass:
        have = _parse(target)
        if have is None:
            continue
        (m, n), specific = have
        if specific and (m, n) == (major, minor):
            return "sass"
        if not specific and m == major and n <= minor:
            return "sass"
    for target in report.ptx:
        have = _parse(target)
        if have is None:
            continue
        (m, n), specific = have
        if (specific and (m, n) == (major, minor)) or (not specific and (m, n) <= (major, minor)):
            return "ptx"
    return None


def _parse(arch: str) -> tuple[tuple[int, int], bool] | None:
    """``sm_120a`` / ``compute_90`` -> ``((12, 0), arch_specific)``."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    if len(digits) < 2:
        return None
    value = int(digits)
    return (value // 10, value % 10), arch.rstrip().endswith("a")


def _sha256(path: Path, size: int, notes: list[str]) -> str | None:
    if size > MAX_HASHED_BYTES:
        notes.append(f"not hashed: {size} bytes is more than {MAX_HASHED_BYTES}")
        return None
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        notes.append(f"not hashed: {exc.strerror or exc}")
        return None
    return h.hexdigest()


def _fatbin_sections(path: Path, notes: list[str]) -> list[bytes]:
    """The bytes of each ``.nv_fatbin`` section (a cubin or object may hold one or none)."""
    from elftools.elf.elffile import ELFFile  # pyelftools: the verify extra

    out: list[bytes] = []
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        file_size = os.fstat(fh.fileno()).st_size
        for section in elf.iter_sections():
            if section.name not in (".nv_fatbin", "__nv_relfatbin"):
                continue
            offset, length = section["sh_offset"], section["sh_size"]
            if length > MAX_SECTION_BYTES or offset + length > file_size:
                notes.append(f"{section.name} claims {length} bytes past what the file holds")
                continue
            fh.seek(offset)
            out.append(fh.read(length))
    return out


def _walk(
    data: bytes, sass: list[str], ptx: list[str], kernels: list[str], notes: list[str]
) -> None:
    """Read the fatbin containers of one section, appending what each entry carries."""
    pos, entries = 0, 0
    while pos + 16 <= len(data):
        magic, _version, header, payload = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            if any(data[pos:]):  # containers are padded with zeros; anything else is damage
                notes.append(f"unexpected bytes at offset {pos} of the fatbin section")
            return
        start, end = pos + header, pos + header + payload
        if header < 16 or end > len(data):
            notes.append(f"a fatbin container claims {payload} bytes past the section's end")
            return
        off = start
        while off + 48 <= end:
            entries += 1
            if entries > MAX_ENTRIES:
                notes.append(f"more than {MAX_ENTRIES} fatbin entries: the rest were not read")
                return
            kind, _ev, ehead, padded = struct.unpack_from("<HHIQ", data, off)
            (number,) = struct.unpack_from("<I", data, off + 28)
            (flags,) = struct.unpack_from("<Q", data, off + 40)
            body_end = off + ehead + padded
            if ehead < 48 or body_end > end:
                notes.append("a fatbin entry claims more bytes than its container holds")
                return
            suffix = "a" if flags & _ARCH_SPECIFIC else ""
            if kind == _KIND_ELF:
                sass.append(f"sm_{number}{suffix}")
                if not flags & _COMPRESSED:
                    kernels.extend(_cubin_kernels(data[off + ehead : body_end], notes))
            elif kind == _KIND_PTX:
                ptx.append(f"compute_{number}{suffix}")
            off = body_end
        pos = end


def _cubin_kernels(cubin: bytes, notes: list[str]) -> list[str]:
    """Kernel names of one cubin: its ``.text.<name>`` sections."""
    if not cubin.startswith(b"\x7fELF"):
        return []
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(cubin))
        return [s.name[len(".text.") :] for s in elf.iter_sections() if s.name.startswith(".text.")]
    except Exception as exc:  # a damaged cubin inside a good container
        notes.append(f"a cubin could not be read ({type(exc).__name__})")
        return []
