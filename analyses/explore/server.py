"""The explorer's routes (Starlette): one page and a JSON API over a ``Session``. Routes only: the
model work is the session's, the page is ``templates/explore.html`` with ``assets/``.

    GET  /             the page (jinja2, autoescaped; the session's info embedded as JSON)
    GET  /api/info     model shape, limits, the ablation modes and reference set, the role map
    GET  /api/heads    the role map from --heads (empty without one)
    POST /api/run      {"text"}                                  tokens, words, next tokens (LMs)
    POST /api/head     {"text", "layer", "head"}                 pattern and norm lens, tokens and words
    POST /api/layer    {"text", "layer", "query"}                every head of a layer from one query token
    POST /api/ablate   {"text", "heads", "mode", "position", "target"}   the change the ablation makes
    POST /api/catalogue {"layer", "head"}                        the head's verdicts from --catalogue (404 without)

Safety, since a browser on the same machine can be made to talk to it: no route takes a path (the
server reads nothing but its own templates, and writes nothing); the Host header must name this server
(DNS rebinding); POST bodies must be JSON (``application/json``: a cross-site form cannot send one
without a CORS preflight, which this server never grants) and at most ``MAX_BODY`` bytes; the page
runs only its own script (a Content-Security-Policy nonce) and renders user text as text.

A request whose client closes its connection while it waits for the model is skipped when its turn
comes (``_while_connected``, ``session.CLIENT_GONE``): abandoned clicks do not queue model work.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import threading
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from analyses.explore.limits import MAX_BODY
from analyses.explore.session import CLIENT_GONE, Abandoned, InputError, Session

__all__ = ["create_app", "allowed_hosts", "MAX_BODY"]

HERE = Path(__file__).parent
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host header values that name this server: the loopback names and ``host``, with the port."""
    names = set(LOOPBACK)
    if host in ("0.0.0.0", "::", "[::]"):  # every interface: the machine's own names too
        names |= {socket.gethostname(), socket.getfqdn()}
    else:
        names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    return {f"{name}:{port}" for name in names} | (names if port == 80 else set())


class _ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@lru_cache(maxsize=1)
def _templates():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    return env.get_template("explore.html")


@cache
def _asset(name: str) -> str:
    return (HERE / "assets" / name).read_text(encoding="utf-8")


def _security_headers(nonce: str | None = None) -> dict[str, str]:
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; script-src {script}; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=_security_headers())


async def _body(request: Request) -> dict:
    """The request's JSON object, or an ``_ApiError``: 415 not JSON, 413 too large, 400 malformed."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise _ApiError(415, f"send the request body as application/json, not {ctype or 'no content type'!r}")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise _ApiError(413, f"request body of {declared} bytes is larger than {MAX_BODY}")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise _ApiError(413, f"request body is larger than {MAX_BODY} bytes")
    except ClientDisconnect:  # nobody to answer: the reply is dropped, and nothing is logged
        raise _ApiError(400, "the client closed the connection before sending the whole body") from None
    try:
        data = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError) as e:
        raise _ApiError(400, f"malformed JSON: {e}") from None
    except RecursionError:  # json's decoder recurses once per level of [ or {
        raise _ApiError(400, "malformed JSON: nested too deeply for a request of this API") from None
    if not isinstance(data, dict):
        raise _ApiError(400, f"the body must be a JSON object, got {type(data).__name__}")
    return data


async def _watch_client(request: Request, gone: threading.Event) -> None:
    """Set ``gone`` when the client closes its connection before its answer (the body is read by now,
    so the next message the server has for this request is its disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _while_connected(request: Request, fn, **kwargs):
    """``fn(**kwargs)`` in a worker thread, with ``CLIENT_GONE`` set to an Event that a watcher sets
    when the client goes away: the session skips the work of a request abandoned while it waited for
    the model (``Abandoned``); a forward pass already running is not interrupted."""
    gone = threading.Event()
    token = CLIENT_GONE.set(gone)  # run_in_threadpool runs fn in a copy of this context
    watcher = asyncio.ensure_future(_watch_client(request, gone))
    try:
        return await run_in_threadpool(fn, **kwargs)
    finally:
        CLIENT_GONE.reset(token)
        watcher.cancel()


def _api(session: Session, method: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()):
    """A POST route that calls ``session.<method>`` with the body's fields, in a worker thread (the
    session's lock queues the model work; a request whose client has gone away by the time the model
    is free is skipped); the session's ``InputError`` becomes its status."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            data = await _body(request)
            unknown = sorted(set(data) - set(fields) - set(optional))
            if unknown:
                raise _ApiError(400, f"unknown field(s) {unknown}; this route takes {list(fields + optional)}")
            missing = [f for f in fields if f not in data]
            if missing:
                raise _ApiError(400, f"missing field(s) {missing}; this route takes {list(fields + optional)}")
            result = await _while_connected(request, getattr(session, method), **data)
        except _ApiError as e:
            return _error(e.status, str(e))
        except InputError as e:
            return _error(e.status, str(e))
        except Abandoned as e:  # nobody to answer: the reply is dropped
            return _error(499, str(e))
        return JSONResponse(result, headers=_security_headers())

    return endpoint


class _HostCheck:
    """Answer 400 to any request whose Host header is not one of ``hosts`` (DNS rebinding: a page
    from another site whose name was re-pointed at 127.0.0.1 sends its own name as Host)."""

    def __init__(self, app, hosts: Iterable[str]):
        self.app, self.hosts = app, {h.lower() for h in hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
            if host not in self.hosts:
                response = _error(400, f"Host header {host!r:.60} does not name this server")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(session: Session, hosts: Iterable[str]) -> _HostCheck:
    """The ASGI app for ``session``, answering only requests whose Host is one of ``hosts``
    (``allowed_hosts(host, port)``)."""

    async def index(request: Request) -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        html = _templates().render(info=session.info(), nonce=nonce, css=_asset("explore.css"), js=_asset("explore.js"))
        return HTMLResponse(html, headers=_security_headers(nonce))

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(session.info(), headers=_security_headers())

    async def heads(request: Request) -> JSONResponse:
        return JSONResponse({"heads": session.roles or {}}, headers=_security_headers())

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/api/info", info, methods=["GET"]),
        Route("/api/heads", heads, methods=["GET"]),
        Route("/api/run", _api(session, "run", ("text",)), methods=["POST"]),
        Route("/api/head", _api(session, "head", ("text", "layer", "head")), methods=["POST"]),
        Route("/api/layer", _api(session, "layer", ("text", "layer", "query")), methods=["POST"]),
        Route(
            "/api/ablate", _api(session, "ablate", ("text", "heads"), ("mode", "position", "target")), methods=["POST"]
        ),
        Route("/api/catalogue", _api(session, "catalogue", ("layer", "head")), methods=["POST"]),
    ]
    return _HostCheck(Starlette(routes=routes), hosts)
