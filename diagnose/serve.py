"""The HTTP service a chat bot calls: ``POST /diagnose`` (text in, JSON or Markdown out).

Built on Starlette, served by uvicorn from :func:`main` (``diagnose serve``).  A request carries
only the log text: no path, no rule directory, no verification option, so nothing a
client sends can make the server read or run anything on its host.  Every request is
bounded: ``max_bytes`` of body (413), ``read_timeout_s`` to send it (408), and
``timeout_s`` for the diagnosis itself (503; it runs in a worker process that is killed
there, :mod:`diagnose.serve_pool`), ``queue`` requests waiting for a worker (more: 503).
Bad input gets a 4xx JSON answer ``{"error": ..., "status": ...}`` and the server carries on.

Endpoints:

- ``GET /healthz`` -> ``{"status": "ok", "kb_version": ...}``
- ``POST /diagnose`` with ``Content-Type: text/plain`` (the raw log) or
  ``application/json`` (``{"text": ..., "format": ..., "chat": ...}``).  The output is
  JSON (the ``--format json`` contract) unless ``format=markdown`` is asked for in the
  query, the JSON body or by ``Accept: text/markdown``; ``chat=slack|discord|github``
  sizes the Markdown for that client.

Needs the ``serve`` extra (``pip install -e '.[serve]' in a crashkb checkout``).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import sys
from dataclasses import asdict, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

# typer reads the command's annotations from this module's globals (postponed evaluation).
import typer

from diagnose.records import record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from diagnose.report import Diagnosis
    from diagnose.serve_pool import DiagnosePool

__all__ = [
    "CHAT_LIMITS",
    "ServeConfig",
    "app_from_env",
    "cap_malloc_arenas",
    "create_app",
    "main",
]

#: Longest Markdown answer per chat client, in characters.
CHAT_LIMITS = {
    # Discord refuses message content over 2,000 characters (bots included).
    "discord": 2000,
    # Slack rejects a Block Kit section over 3,000 characters (a bot posts blocks).
    "slack": 3000,
    # GitHub comments take 65,536, but a verdict reads best short: the renderer's default.
    "github": 3500,
}

#: Environment variable that carries the config to uvicorn worker processes.
CONFIG_ENV = "DIAGNOSE_SERVE_CONFIG"

_TEXT_TYPES = ("text/plain", "text/markdown", "text/x-log", "")
_JSON_FIELDS = frozenset({"text", "format", "chat"})
_FORMATS = ("json", "markdown")
# Bytes that never occur in a text log but always in archives, images and executables.
_BINARY_SNIFF = 8192


@record(slots=False)
class ServeConfig:
    """Limits and rule directories of one server; set by whoever starts it, never by a request."""

    #: Largest body accepted.  A pasted log is a few KB; 1 MiB leaves room for whole
    #: server logs while a 100 MB upload is refused before it is read.
    max_bytes: int = 1 << 20
    #: Wall-clock limit on one diagnosis (it is linear-time; this guards the host).
    timeout_s: float = 10.0
    #: Time a client has to send its whole body (slow clients hold a connection).
    read_timeout_s: float = 10.0
    #: Diagnoses running at once in this process, each in a worker process (at most one
    #: per CPU) that is killed when it passes ``timeout_s``.
    concurrency: int = 4
    #: Requests that may wait for a busy worker; more are refused at once with 503.
    queue: int = 64
    #: Time a client has to finish its request line and headers (slowloris), and the most
    #: connections open at once; both enforced per connection (:mod:`diagnose.serve_guard`).
    header_timeout_s: float = 10.0
    max_connections: int = 512
    #: A diagnosis worker that ends a request above this resident memory is replaced (a warm
    #: worker holds about 60 MB; a 1 MB hostile body can leave it at twice that).
    worker_max_rss_mb: float = 160.0
    rule_dirs: tuple[str, ...] = field(default_factory=tuple)

    def to_env(self) -> str:
        """Serialise for :data:`CONFIG_ENV` (multi-worker servers rebuild the app from it)."""
        return json.dumps(asdict(self))

    def warm_up(self) -> str:
        """Load the kb and rule base once, so a bad rule dir fails at start, not per request.

        Returns the kb version.  Diagnoses run in :meth:`pool`'s workers, which warm up
        on their own.
        """
        from diagnose.api import diagnose_text

        rule_dirs = tuple(Path(d) for d in self.rule_dirs)
        return diagnose_text("", source="warm-up", rule_dirs=rule_dirs).kb_version

    def pool(self) -> DiagnosePool:
        """The worker processes that run this server's diagnoses (started on first use)."""
        from diagnose.serve_pool import DiagnosePool, default_pool_size

        size = default_pool_size(self.concurrency)
        return DiagnosePool(
            size, self.queue, self.timeout_s, self.rule_dirs, max_rss_mb=self.worker_max_rss_mb
        )


# Options `diagnose serve` and `diagnose mcp` share (typer resolves these aliases from the
# globals of the module that uses them, so mcp_server imports them by name).
MaxBytesOption = Annotated[int, typer.Option("--max-bytes", help="largest log accepted, in bytes")]
TimeoutOption = Annotated[float, typer.Option("--timeout", help="seconds one diagnosis may take")]
RulesOption = Annotated[
    Optional[list[Path]],  # noqa: UP045 - typer needs Optional on 3.10
    typer.Option("--rules", help="extra rule directory (repeatable)"),
]


class _Refused(Exception):
    """A request that gets a 4xx/5xx answer: status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def create_app(config: ServeConfig | None = None) -> Starlette:
    """Build the Starlette app; loads the rule base now so a bad rule dir fails at start.

    Raises :class:`ImportError` naming the extra when Starlette is not installed, and
    :class:`~diagnose.errors.RuleFileError` for an invalid rule directory.
    """
    try:
        import anyio
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "diagnose serve needs the serve extra: pip install -e '.[serve]' in a crashkb checkout"
        ) from exc
    from diagnose.serve_pool import Busy

    cfg = config or ServeConfig()
    kb_version = cfg.warm_up()
    pool = cfg.pool()
    admitted = pool.size + pool.queue
    # One waiting thread per admitted request: it blocks on a worker's pipe, not on a CPU.
    limiter = anyio.CapacityLimiter(admitted)
    inflight = 0

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "kb_version": kb_version})

    async def diagnose(request: Request) -> Response:
        nonlocal inflight
        try:
            text, fmt, chat = await _read_request(request, cfg)
            if inflight >= admitted:
                raise _Refused(503, f"all {pool.size} diagnosis workers are busy; try again")
            inflight += 1
            try:
                result = await anyio.to_thread.run_sync(pool.diagnose, text, limiter=limiter)
            except (TimeoutError, Busy) as exc:
                raise _Refused(503, str(exc)) from None
            finally:
                inflight -= 1
        except _Refused as refused:
            return _error(refused.status, refused.message)
        except Exception as exc:  # a bug answers 500; the server stays up
            return _error(500, f"internal error ({type(exc).__name__}); please report it")
        return _answer(result, fmt, chat)

    def _error(status: int, message: str) -> Response:
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": message, "status": status}, status, headers=headers)

    def _answer(result: Diagnosis, fmt: str, chat: str | None) -> Response:
        headers = {"X-Diagnose-Cause": result.cause}
        if fmt == "markdown":
            from diagnose.render.markdown import MAX_CHARS, render_markdown

            limit = CHAT_LIMITS.get(chat or "", MAX_CHARS)
            body = render_markdown(result, max_chars=limit, flavor=chat or "github")
            return Response(body, media_type="text/markdown; charset=utf-8", headers=headers)
        from diagnose.render.json import render_json

        return Response(render_json(result), media_type="application/json", headers=headers)

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/diagnose", diagnose, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()

    return Starlette(routes=routes, lifespan=lifespan)


def app_from_env() -> Starlette:
    """App factory for uvicorn workers: the config comes from :data:`CONFIG_ENV`."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        return create_app()
    data: dict[str, Any] = json.loads(raw)
    data["rule_dirs"] = tuple(data.get("rule_dirs", ()))
    config = ServeConfig(**data)
    _guard(config)
    return create_app(config)


def _guard(config: ServeConfig) -> type:
    """Set this process's connection limits; the protocol class uvicorn is to use."""
    from diagnose.serve_guard import GuardedH11Protocol, configure

    configure(config.header_timeout_s, config.max_connections)
    return GuardedH11Protocol


async def _read_request(request: Request, cfg: ServeConfig) -> tuple[str, str, str | None]:
    """Validate and read one request: return (log text, output format, chat client)."""
    import anyio

    mime, _, params = request.headers.get("content-type", "").partition(";")
    mime = mime.strip().lower()
    is_json = mime == "application/json"
    if not is_json and mime not in _TEXT_TYPES:
        raise _Refused(
            415,
            f"content type {mime!r} is not accepted: send the log as text/plain or "
            "JSON {'text': ...} (curl -H 'Content-Type: text/plain' --data-binary @crash.log)",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cfg.max_bytes:
        raise _Refused(413, f"body is {int(declared)} bytes; the limit is {cfg.max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(cfg.read_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > cfg.max_bytes:
                    raise _Refused(413, f"body is over the limit of {cfg.max_bytes} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise _Refused(408, f"body not received within {cfg.read_timeout_s:g} s") from None
    body = b"".join(chunks)
    charset = _charset(params)
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        raise _Refused(415, f"unknown charset {charset!r}") from None
    wide = codec.startswith(("utf-16", "utf-32"))  # NUL bytes are part of their text
    if (b"\x00" in body[:_BINARY_SNIFF] and not wide) or body[:2] == b"\x1f\x8b":
        raise _Refused(415, "body is binary (or compressed); send the log as text")
    if codec not in _TEXT_CODECS:
        # punycode, idna, unicode_escape and friends are codecs, not text encodings of a log,
        # and some take seconds a megabyte (punycode blocked the event loop for 30 s).
        allowed = ", ".join(sorted(_TEXT_CODECS))
        raise _Refused(415, f"charset {charset!r} is not a text encoding read here ({allowed})")
    # Decoding a large body is CPU work: off the event loop, so /healthz stays responsive.
    decoded = await anyio.to_thread.run_sync(lambda: body.decode(codec, errors="replace"))
    fmt = request.query_params.get("format") or _from_accept(request.headers.get("accept", ""))
    chat = request.query_params.get("chat")
    if is_json:
        decoded, fmt, chat = _from_json(decoded, fmt, chat)
    if not decoded.strip():
        raise _Refused(400, "empty body: send the crash log text")
    if fmt not in _FORMATS:
        raise _Refused(400, f"format must be json or markdown, not {fmt!r}")
    if chat is not None and chat not in CHAT_LIMITS:
        raise _Refused(400, f"chat must be one of {', '.join(CHAT_LIMITS)}, not {chat!r}")
    return decoded, fmt, chat


#: Encodings a log is written in (``codecs.lookup(...).name`` spellings).
_TEXT_CODECS = frozenset({
    "utf-8", "utf-8-sig", "ascii", "iso8859-1", "cp1252", "utf-16", "utf-16-le", "utf-16-be",
    "utf-32", "gb18030", "gbk", "gb2312", "big5", "shift_jis", "euc_jp", "euc_kr", "cp932",
    "cp936", "cp949",
})  # fmt: skip


def _charset(params: str) -> str:
    """The ``charset=`` of a Content-Type's parameters (UTF-8 when absent)."""
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return "utf-8"


def _from_accept(accept: str) -> str:
    """``markdown`` when the client prefers Markdown, else ``json``."""
    return "markdown" if "text/markdown" in accept.lower() else "json"


def _from_json(body: str, fmt: str, chat: str | None) -> tuple[str, str, str | None]:
    """Read ``{"text": ..., "format": ..., "chat": ...}``; unknown fields are refused."""
    try:
        data = json.loads(body) if body.strip() else None
    except json.JSONDecodeError as exc:
        raise _Refused(400, f"body is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:  # [[[[... nested past the parser's stack
        raise _Refused(400, "body is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise _Refused(400, 'JSON body must be an object: {"text": "<the log>"}')
    unknown = sorted(set(data) - _JSON_FIELDS)
    if unknown:
        # A "path" or "rules" field must not look accepted: requests carry text only.
        raise _Refused(400, f"unknown field(s) {unknown}; accepted: text, format, chat")
    text = data.get("text")
    if not isinstance(text, str):
        raise _Refused(400, 'field "text" (a string holding the log) is required')
    fmt = data.get("format", fmt)
    chat = data.get("chat", chat)
    if not isinstance(fmt, str) or not (chat is None or isinstance(chat, str)):
        raise _Refused(400, 'fields "format" and "chat" must be strings')
    return text, fmt, chat


# --- command line (``diagnose serve``; diagnose.cli.main dispatches here) -------------------


def main(argv: list[str]) -> None:
    """Run ``diagnose serve [OPTIONS]``; ``argv`` holds the options after ``serve``.

    A command-line shell like ``cli.py``: it prints, exits and lets uvicorn configure its
    logging.  typer is imported here so the app factory stays light for uvicorn workers.
    """
    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)

    @app.command()
    def serve(
        host: Annotated[str, typer.Option("--host", help="address to bind")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port")] = 8000,
        workers: Annotated[int, typer.Option("--workers", help="worker processes")] = 1,
        max_bytes: MaxBytesOption = ServeConfig.max_bytes,
        timeout: TimeoutOption = ServeConfig.timeout_s,
        read_timeout: Annotated[
            float, typer.Option("--read-timeout", help="seconds a client has to send its body")
        ] = ServeConfig.read_timeout_s,
        concurrency: Annotated[
            int, typer.Option("--concurrency", help="diagnoses at once per worker")
        ] = ServeConfig.concurrency,
        queue: Annotated[
            int, typer.Option("--queue", help="requests that may wait for a busy diagnosis")
        ] = ServeConfig.queue,
        header_timeout: Annotated[
            float, typer.Option("--header-timeout", help="seconds a client has to send headers")
        ] = ServeConfig.header_timeout_s,
        max_connections: Annotated[
            int, typer.Option("--max-connections", help="connections open at once")
        ] = ServeConfig.max_connections,
        rules: RulesOption = None,
        log_level: Annotated[
            str, typer.Option("--log-level", help="uvicorn log level")
        ] = "warning",
    ) -> None:
        """Serve POST /diagnose (text in; JSON or Markdown out) and GET /healthz over HTTP."""
        config = ServeConfig(
            max_bytes=max_bytes,
            timeout_s=timeout,
            read_timeout_s=read_timeout,
            concurrency=concurrency,
            queue=queue,
            header_timeout_s=header_timeout,
            max_connections=max_connections,
            rule_dirs=tuple(str(r) for r in rules or ()),
        )
        try:
            import uvicorn

            # Built once here even with workers: a bad --rules dir fails before binding.
            application = create_app(config)
            protocol = _guard(config)
        except ImportError as exc:
            _fail(
                f"{exc}"
                if "crashkb checkout" in str(exc)
                else f"{exc}: pip install -e '.[serve]' in a crashkb checkout"
            )
        except Exception as exc:  # RuleFileError and friends: one line, exit 2
            _fail(str(exc))
        cap_malloc_arenas()
        sys.stderr.write(f"diagnose: serving on http://{host}:{port} (POST /diagnose)\n")
        if workers > 1:
            # Worker processes import the app by name and read the same limits from the env.
            os.environ[CONFIG_ENV] = config.to_env()
            uvicorn.run(
                "diagnose.serve:app_from_env",
                factory=True,
                host=host,
                port=port,
                workers=workers,
                log_level=log_level,
                timeout_keep_alive=5,
                http=protocol,
            )
        else:
            uvicorn.run(
                application,
                host=host,
                port=port,
                log_level=log_level,
                timeout_keep_alive=5,
                http=protocol,
            )

    app(args=argv, prog_name="diagnose serve")


#: glibc's M_ARENA_MAX parameter for mallopt(3).
_M_ARENA_MAX = -8


def cap_malloc_arenas(arenas: int = 2) -> None:
    """Limit glibc's malloc to ``arenas`` arenas in this server and the processes it starts.

    glibc gives each thread that allocates its own arena, up to eight per core, and keeps
    what it grew: with the event loop and the thread pool that decodes bodies and waits on
    workers, the server process kept growing under the attack benchmark, more on more
    cores; with two arenas it stays flat (bench/results/serve.md). An arena count the
    operator set (``MALLOC_ARENA_MAX``) is kept; elsewhere than glibc this does nothing.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    os.environ["MALLOC_ARENA_MAX"] = str(arenas)  # read by the processes started from here
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to cap
        import ctypes

        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, arenas)


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit code 2, as the main CLI does."""
    from diagnose.exitcodes import ExitCode

    sys.stderr.write(f"diagnose: {message}\n")
    raise typer.Exit(ExitCode.USAGE_OR_INPUT_ERROR)
