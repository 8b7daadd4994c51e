"""``diagnose mcp``: the real MCP client drives the real server over stdio.

The server is started as a subprocess (``python -m diagnose mcp``) by the SDK's
``stdio_client``, exactly as an MCP host starts it.  Skips when the ``mcp`` extra is absent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the mcp extra")

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

from diagnose.api import diagnose_text
from diagnose.mcp_server import TOOL_DESCRIPTION
from diagnose.render.markdown import render_markdown

ROOT = Path(__file__).resolve().parents[1]

IMA_LOG = """\
(VllmWorker rank=5 pid=31337) ERROR 07-09 11:12:13 [worker.py:77] Traceback (most recent call last):
(VllmWorker rank=5 pid=31337) ERROR 07-09 11:12:13 [worker.py:77]   File "/srv/inference/step.py", \
line 51, in decode
(VllmWorker rank=5 pid=31337) ERROR 07-09 11:12:13 [worker.py:77]     torch.cuda.synchronize()
(VllmWorker rank=5 pid=31337) ERROR 07-09 11:12:13 [worker.py:77] RuntimeError: CUDA error: an \
illegal memory access was encountered
"""

Session = Callable[[ClientSession], Awaitable[Any]]


def _with_session(body: Session, *extra: str) -> Any:
    """Start ``diagnose mcp`` over stdio, initialise a session, run ``body`` on it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "diagnose", "mcp", *extra], cwd=str(ROOT)
    )

    async def main() -> Any:
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return await body(s)

    return anyio.run(main)


def _text(result: Any) -> str:
    assert result.content and isinstance(result.content[0], TextContent)
    return str(result.content[0].text)


def test_lists_the_diagnose_tool() -> None:
    async def body(s: ClientSession) -> Any:
        return await s.list_tools()

    tools = {t.name: t for t in _with_session(body).tools}
    assert set(tools) == {"diagnose"}
    tool = tools["diagnose"]
    assert tool.description == TOOL_DESCRIPTION
    assert tool.input_schema["required"] == ["log"]
    assert set(tool.input_schema["properties"]) == {"log", "format"}


def test_diagnose_tool_markdown_and_json() -> None:
    async def body(s: ClientSession) -> Any:
        md = await s.call_tool("diagnose", {"log": IMA_LOG})
        js = await s.call_tool("diagnose", {"log": IMA_LOG, "format": "json"})
        return md, js

    md, js = _with_session(body)
    want = diagnose_text(IMA_LOG, source="mcp")
    assert want.cause == "illegal-memory-access"
    assert not md.is_error and _text(md) == render_markdown(want)
    data = json.loads(_text(js))
    assert (data["cause"], data["fatal"]) == (want.cause, want.fatal)


def test_bad_calls_are_tool_errors_and_the_server_carries_on() -> None:
    """Oversized, empty and mistyped calls answer is_error; a good call still works after."""

    async def body(s: ClientSession) -> Any:
        big = await s.call_tool("diagnose", {"log": "x" * 5000})
        empty = await s.call_tool("diagnose", {"log": "  \n"})
        typed = await s.call_tool("diagnose", {"log": IMA_LOG, "format": "yaml"})
        after = await s.call_tool("diagnose", {"log": IMA_LOG})
        return big, empty, typed, after

    big, empty, typed, after = _with_session(body, "--max-bytes", "4096")
    assert big.is_error and "limit is 4096" in _text(big)
    assert empty.is_error and "empty" in _text(empty)
    assert typed.is_error
    assert not after.is_error and "illegal-memory-access" in _text(after)
