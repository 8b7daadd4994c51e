"""An MCP server that gives LLM chat clients one tool, ``diagnose``: crash log in, verdict out.

Clients (Claude Desktop, IDE agents, any MCP host) start ``diagnose mcp`` and talk to it
over stdio.  The tool takes the log as text, never a path, so a model cannot make the
server read files; it applies the same size and time limits as the HTTP service
(:class:`diagnose.serve.ServeConfig`).  Markdown is the default answer because a model
reads and quotes it well; ``format="json"`` returns the ``--format json`` contract.

Needs the ``mcp`` extra (``pip install -e '.[mcp]' in a crashkb checkout``; the official SDK,
version 2).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

# typer reads the command's annotations from this module's globals (postponed evaluation).
import typer

from diagnose.serve import (
    MaxBytesOption,
    RulesOption,
    ServeConfig,
    TimeoutOption,
)
from diagnose.serve_pool import Busy

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["TOOL_DESCRIPTION", "build_server", "main"]

TOOL_DESCRIPTION = (
    "Name the root cause of a crash log from the GPU LLM-serving stack (sglang, vLLM, "
    "TensorRT-LLM, FlashInfer, CUTLASS, DeepEP, NCCL, PyTorch, Triton): pass the log text "
    "as the user pasted it (fences, quotes, prefixes and wrapping are undone). Returns the "
    "cause id, how sure, the evidence lines, and what to change."
)


def build_server(config: ServeConfig | None = None) -> MCPServer:
    """Build the MCP server with its ``diagnose`` tool (rules load now, not on first call).

    Raises :class:`ImportError` naming the extra when the ``mcp`` package is missing.
    """
    try:
        import anyio
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "diagnose mcp needs the mcp extra (mcp>=2): "
            "pip install -e '.[mcp]' in a crashkb checkout"
        ) from exc

    cfg = config or ServeConfig()
    kb_version = cfg.warm_up()
    pool = cfg.pool()
    server = MCPServer(
        "crashkb",
        version=kb_version,
        instructions="Call `diagnose` with a crash log's text to get its root cause.",
        # The SDK configures logging when the server is built (this module is a shell, like
        # cli.py); WARNING keeps a refused call (a ToolError, logged at INFO) off stderr.
        log_level="WARNING",
    )

    @server.tool(name="diagnose", description=TOOL_DESCRIPTION)
    async def diagnose(log: str, format: Literal["markdown", "json"] = "markdown") -> str:
        size = len(log.encode("utf-8", errors="replace"))
        if size > cfg.max_bytes:
            raise ToolError(f"log is {size} bytes; the limit is {cfg.max_bytes}: send the tail")
        if not log.strip():
            raise ToolError("log is empty: pass the crash log text")
        try:
            # In a worker process killed at the time limit (diagnose.serve_pool), as serve does.
            result = await anyio.to_thread.run_sync(pool.diagnose, log, "mcp")
        except (TimeoutError, Busy) as exc:
            raise ToolError(str(exc)) from None
        except RuntimeError as exc:
            raise ToolError(f"internal error ({exc}); please report it") from None
        if format == "json":
            from diagnose.render.json import render_json

            return render_json(result)
        from diagnose.render.markdown import render_markdown

        return render_markdown(result)

    return server


# --- command line (``diagnose mcp``; diagnose.cli.main dispatches here) ---------------------


def main(argv: list[str]) -> None:
    """Run ``diagnose mcp [OPTIONS]``: the MCP server on stdio (a command-line shell)."""
    from diagnose.exitcodes import ExitCode

    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)

    @app.command()
    def mcp(
        max_bytes: MaxBytesOption = ServeConfig.max_bytes,
        timeout: TimeoutOption = ServeConfig.timeout_s,
        rules: RulesOption = None,
    ) -> None:
        """Run the MCP server on stdio: the `diagnose` tool for LLM chat clients."""
        config = ServeConfig(
            max_bytes=max_bytes, timeout_s=timeout, rule_dirs=tuple(str(r) for r in rules or ())
        )
        try:
            server = build_server(config)
        except Exception as exc:  # missing extra, bad --rules dir: one line, exit 2
            sys.stderr.write(f"diagnose: {exc}\n")
            raise typer.Exit(ExitCode.USAGE_OR_INPUT_ERROR) from None
        server.run("stdio")

    app(args=argv, prog_name="diagnose mcp")
