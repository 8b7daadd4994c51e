"""IPython / Jupyter / Colab tracebacks: one region, IPython's frames, the last exception.

Our own notebooks' tracebacks in the shapes IPython 7 and 8 print; paths are made up.
"""

from __future__ import annotations

import pytest

from diagnose.api import diagnose_text
from diagnose.frames.dialects import parse_frame
from diagnose.frames.ipython import arrow_line, is_frame_line, is_source_line
from diagnose.model import LogLine, Region
from diagnose.regions import find_regions

RULE = "-" * 75

IPYTHON8 = f"""\
{RULE}
OutOfMemoryError                          Traceback (most recent call last)
Cell In[7], line 3
      1 prompt = "Summarise the report"
      2 inputs = tok(prompt, return_tensors="pt").to("cuda")
----> 3 out = model.generate(**inputs, max_new_tokens=256)

File /opt/conda/lib/python3.11/site-packages/torch/utils/_contextlib.py:116, in context_decorator.<locals>.decorate_context(*args, **kwargs)
    113 @functools.wraps(func)
    114 def decorate_context(*args, **kwargs):
    115     with ctx_factory():
--> 116         return func(*args, **kwargs)

    [... skipping hidden 1 frame]

File ~/work/gen/loop.py:88, in sample(model, ids)
     86 for step in range(limit):
---> 88     logits = model(ids).logits

OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 14.75 GiB of which 1.06 GiB is free."""

IPYTHON7 = f"""\
{RULE}
RuntimeError                              Traceback (most recent call last)
<ipython-input-5-3f2d1a9b8c7e> in <module>()
      3 idx = torch.tensor([99], device="cuda")
----> 4 y = x[idx]
      5 print(y)

/usr/local/lib/python3.7/dist-packages/torch/_tensor.py in __getitem__(self, key)
    521             raise RuntimeError("not reached")
--> 522         return super().__getitem__(key)

RuntimeError: CUDA error: device-side assert triggered"""

CHAINED = f"""\
{RULE}
KeyError                                  Traceback (most recent call last)
File /srv/lib/registry.py:40, in lookup(name)
     39 try:
---> 40     return TABLE[name]
     41 except KeyError as e:

KeyError: 'flashinfer'

The above exception was the direct cause of the following exception:

{RULE}
ValueError                                Traceback (most recent call last)
Input In [2], in <cell line: 1>()
----> 1 lookup("flashinfer")

File /srv/lib/registry.py:42, in lookup(name)
     41 except KeyError as e:
---> 42     raise ValueError(f"unknown backend {{name}}") from e

ValueError: unknown backend flashinfer"""


def one_region(text: str) -> Region:
    regions = find_regions([LogLine(i + 1, row) for i, row in enumerate(text.split("\n"))])
    assert len(regions) == 1, [(r.kind, r.lines, r.message) for r in regions]
    return regions[0]


def test_ipython8_traceback_is_one_region_with_every_frame() -> None:
    region = one_region(IPYTHON8)
    assert region.kind == "python-traceback"
    assert region.lines == (2, 20)
    assert region.message.startswith("OutOfMemoryError: CUDA out of memory.")
    assert [(f.file, f.line, f.function) for f in region.frames] == [
        ("Cell In[7]", 3, "<module>"),
        (
            "/opt/conda/lib/python3.11/site-packages/torch/utils/_contextlib.py",
            116,
            "context_decorator.<locals>.decorate_context",
        ),
        ("~/work/gen/loop.py", 88, "sample"),
    ]
    assert {f.dialect for f in region.frames} == {"python"}


def test_ipython7_frames_take_their_line_from_the_arrow() -> None:
    region = one_region(IPYTHON7)
    assert region.message == "RuntimeError: CUDA error: device-side assert triggered"
    assert [(f.file, f.line, f.function) for f in region.frames] == [
        ("<ipython-input-5-3f2d1a9b8c7e>", 4, "<module>"),
        ("/usr/local/lib/python3.7/dist-packages/torch/_tensor.py", 522, "__getitem__"),
    ]


def test_a_chain_across_ipython_rules_is_one_failure_ending_in_the_last_exception() -> None:
    region = one_region(CHAINED)
    assert region.lines == (2, 21)
    assert region.message == "ValueError: unknown backend flashinfer"
    assert [f.file for f in region.frames] == [
        "/srv/lib/registry.py",
        "Input In [2]",
        "/srv/lib/registry.py",
    ]


def test_jupyter_colours_and_the_diagnosis() -> None:
    coloured = "\n".join(f"\x1b[0;31m{row}\x1b[0m" if row else row for row in IPYTHON8.split("\n"))
    verdict = diagnose_text(coloured)
    assert verdict.cause == "cuda-oom"
    assert len(verdict.crashes) == 1
    assert len(verdict.crashes[0].frames) == 3


@pytest.mark.parametrize(
    "line",
    [
        "Cell In[12], line 4, in step(batch)",
        "Cell In [3], line 1",
        "Input In [9], in <cell line: 2>()",
        "File /srv/a b/x.py:12, in f()",
        "File ~/x.py:3, in <module>",
        "<ipython-input-1-abc> in <module>",
        "/usr/lib/python3/dist-packages/x.py in f(a, b)",
    ],
)
def test_frame_lines(line: str) -> None:
    assert is_frame_line(line)
    frame = parse_frame(LogLine(1, line))
    assert frame is not None and frame.dialect == "python" and frame.function


@pytest.mark.parametrize(
    "line",
    [
        "Cell phone numbers in [1], line 2",
        "File not found: /srv/x.py",
        "File /srv/x.py, line 3",  # neither dialect
        "/usr/lib/libcuda.so.1(+0x2a3b4) [0x7f00aa2a3b4]",  # a glibc frame starting with '/'
        "<built-in method> in module",
    ],
)
def test_not_frame_lines(line: str) -> None:
    assert not is_frame_line(line)


def test_a_glibc_frame_starting_with_a_slash_is_still_a_glibc_frame() -> None:
    frame = parse_frame(LogLine(1, "/usr/lib/libcuda.so.1(+0x2a3b4) [0x7f00aa2a3b4]"))
    assert frame is not None and frame.dialect == "glibc"


def test_source_lines_and_arrows() -> None:
    assert is_source_line("----> 3 out = f()")
    assert is_source_line("      1 x = 1")
    assert is_source_line("    [... skipping hidden 1 frame]")
    assert not is_source_line("RuntimeError: 3 things failed")
    assert arrow_line("--> 522         return x") == 522
    assert arrow_line("----> 4") == 4
    assert arrow_line("      5 print(y)") is None


def test_databricks_cell_frames() -> None:
    frame = parse_frame(LogLine(2, "File <command-609584913430219>, line 5"))
    assert frame is not None
    assert (frame.file, frame.line, frame.function) == ("<command-609584913430219>", 5, "<module>")
