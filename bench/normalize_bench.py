"""Side-by-side throughput of the ingest stage: reading and normalising, against plain Python.

Generates a synthetic server log with ``bench/gen_server_log.py`` (default 20 MB), plus a
"damaged" copy of it in which every line went through a terminal, a log shipper and a
chat client (ANSI colour, docker-compose prefix, ``> `` quote, code fences, HTML
entities), then times in one run:

* ``read``: ``open().read()`` vs :func:`read_text` vs :func:`iter_lines` (gzip'd too);
* ``normalize``: ``str.split`` + ``rstrip`` vs :func:`normalize` vs
  :func:`normalize_lines` fed by :func:`iter_lines`, on the clean and damaged logs.

Prints lines/s and the ratio to the plain-Python baseline of the same row group.
Usage: ``python bench/normalize_bench.py [SIZE_MB]``.
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from diagnose.ingest.normalize import normalize, normalize_lines
from diagnose.ingest.read import iter_lines, read_text

ESC = "\x1b"


def _generator() -> Callable[[Path, int], tuple[int, int]]:
    spec = importlib.util.spec_from_file_location(
        "gen_server_log", Path(__file__).with_name("gen_server_log.py")
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate  # type: ignore[no-any-return]


def _damage(text: str) -> str:
    """Wrap every line the way a terminal + docker compose + a chat quote would."""
    out = ["> Here is the log:", "> ```text"]
    for i, line in enumerate(text.split("\n")):
        line = line.replace("<", "&lt;").replace(">", "&gt;")
        colour = f"{ESC}[3{i % 7}m" if i % 3 == 0 else ""
        reset = f"{ESC}[0m" if colour else ""
        out.append(f"> api-{i % 4}  | {colour}{line}{reset}")
    out.append("> ```")
    return "\n".join(out)


def _time(fn: Callable[[], int], repeat: int = 3) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - start)
    return best, count


def _row(name: str, seconds: float, lines: int, base: float, size: int) -> None:
    print(
        f"  {name:<34} {lines / seconds:>12,.0f} lines/s {size / seconds / 1e6:>8.1f} MB/s"
        f"   x{seconds / base:>6.1f} of baseline"
    )


def main() -> None:
    """Run the benchmark and print the table."""
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    with tempfile.TemporaryDirectory() as tmp:
        clean_path = Path(tmp) / "server.log"
        _generator()(clean_path, int(size_mb * 1e6))
        clean = clean_path.read_text(encoding="utf-8")
        damaged_path = Path(tmp) / "damaged.log"
        damaged_path.write_text(_damage(clean), encoding="utf-8")
        gz_path = Path(tmp) / "server.log.1"  # gzip'd, recognised by magic bytes
        gz_path.write_bytes(gzip.compress(clean.encode(), compresslevel=1))
        size = clean_path.stat().st_size

        print(f"read ({size / 1e6:.1f} MB)")
        base, n = _time(lambda: clean_path.read_text(encoding="utf-8").count("\n"))
        _row("open().read() [baseline]", base, n, base, size)
        sec, n = _time(lambda: read_text(clean_path).count("\n"))
        _row("read_text", sec, n, base, size)
        sec, n = _time(lambda: sum(1 for _ in iter_lines(clean_path)))
        _row("iter_lines", sec, n, base, size)
        sec, n = _time(lambda: read_text(gz_path).count("\n"))
        _row("read_text (gzip)", sec, n, base, size)

        for label, path in (("clean", clean_path), ("damaged", damaged_path)):
            text = path.read_text(encoding="utf-8")
            size = len(text.encode())
            print(f"normalize, {label} log ({size / 1e6:.1f} MB)")
            base, n = _time(lambda t=text: len([s.rstrip() for s in t.split("\n")]))  # type: ignore[misc]
            _row("split + rstrip [baseline]", base, n, base, size)
            sec, n = _time(lambda t=text: len(normalize(t)))  # type: ignore[misc]
            _row("normalize", sec, n, base, size)
            sec, n = _time(
                lambda p=path: sum(1 for _ in normalize_lines(enumerate(iter_lines(p), 1)))  # type: ignore[misc]
            )
            _row("iter_lines -> normalize_lines", sec, n, base, size)


if __name__ == "__main__":
    main()
