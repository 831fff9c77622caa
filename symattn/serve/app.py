"""The page's ASGI app (Starlette): one page, one endpoint, two static files, and its guards.

Safe by default, because a page on 127.0.0.1 is reachable from every site the user visits:

- the Host header must be the address the server was started on (127.0.0.1:PORT or
  localhost:PORT), so a rebinding DNS name cannot reach it (400);
- a POST must carry the page's own Origin (403), so another site cannot post to it;
- a body is capped (413), the problem meets the CLI's caps, and the derivation runs in a
  worker with a time and memory budget (:mod:`symattn.serve.workers`), a full queue 503;
- every response carries a strict Content-Security-Policy: the page runs only its own
  script files, nothing is fetched from elsewhere, and it cannot be framed.  The guard wraps
  the whole app, Starlette's error handler included, so a refusal, a 404 and a 500 carry the
  same headers as a 200.
"""

from __future__ import annotations

import re
from importlib import resources
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from symattn.errors import ProblemError, SymattnError
from symattn.serve.derive import field_of, one_line, page_view, parse_problem_json, toml_of
from symattn.serve.downloads import DOWNLOADS, NO_TEX, disposition
from symattn.serve.page import editor_page
from symattn.serve.sheetform import sheet_choices
from symattn.serve.workers import Busy, Result, TooLarge, WorkerPool

__all__ = ["CSP", "MAX_BODY_BYTES", "make_app"]

MAX_BODY_BYTES = 256 * 1024     # one problem as JSON: a 64×64 W of 3-digit decimals fits
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
       "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
STATIC = {"serve.js": "text/javascript; charset=utf-8", "serve_keys.js": "text/javascript; charset=utf-8",
          "serve.css": "text/css; charset=utf-8", "downloads.js": "text/javascript; charset=utf-8",
          "downloads.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}


class Guard:
    """ASGI middleware: refuse foreign hosts and origins, cap bodies, add the security headers."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        refusal: Response | None = None
        if host not in self.hosts:
            refusal = PlainTextResponse(f"unknown host {host!r}: open the page at "
                                        f"http://{sorted(self.hosts)[0]}/", 400)
        elif scope["method"] not in ("GET", "HEAD") and headers.get("origin") != f"http://{host}":
            refusal = PlainTextResponse("a request from another site is refused", 403)
        elif _declared_length(headers) > MAX_BODY_BYTES:
            refusal = _too_big()

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.lower().encode(), v.encode()) for k, v in HEADERS.items())]
            await send(message)

        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)     # Starlette's 500 too: the guard is outermost


def _declared_length(headers: dict[str, str]) -> int:
    try:
        return int(headers.get("content-length", "0"))
    except ValueError:
        return MAX_BODY_BYTES + 1


def _too_big() -> Response:
    return PlainTextResponse(f"the request is over {MAX_BODY_BYTES // 1024} KiB, the most the page "
                             "takes: use the CLI for a problem this large", 413)


async def _body(request: Request) -> bytes | None:
    """The body, or None once it passes the cap (a chunked body declares no length)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def make_app(problem: dict[str, Any], fragment: str, *, hosts: frozenset[str],
             pool: WorkerPool, tex: bool = False) -> ASGIApp:
    """The app for one starting problem (its table and its derivation, already worked);
    ``tex``: a TeX engine is on PATH, so the page offers PDFs."""
    page = editor_page(problem, fragment, tex=tex)

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8")

    async def derive(request: Request) -> Response:
        digits, params = request.query_params.get("digits", "3"), request.query_params
        return await _worked(request, lambda data: pool.derive(data, _digits(digits), page_view(params)))

    async def check(request: Request) -> Response:
        def checked(data: Any) -> Awaitable[Result]:
            if set(data) != {"problem", "figures"} or not isinstance(data["problem"], dict):
                raise ProblemError("a check is a table of problem (the problem's table) and figures "
                                   "(a list of tables with target and text)")
            return pool.check(data["problem"], data["figures"])
        return await _worked(request, checked)

    async def download(request: Request) -> Response:
        """The derivation (or a worksheet zip) as a file, made in a worker like a derivation."""
        kind = request.path_params["kind"]
        if kind not in DOWNLOADS:
            return PlainTextResponse("not found", 404)
        if kind == "pdf" and not tex:
            return _error(NO_TEX, 422, field=None)
        extension, media = DOWNLOADS[kind]
        title: list[str] = []

        def made(data: Any) -> Awaitable[Result]:
            digits = _digits(request.query_params.get("digits", "3"))
            view = page_view(request.query_params)
            named = str(data.get("title") or "derivation")
            if kind != "worksheet":
                title.append(named)
                return pool.download(data, kind, digits, None, view)
            choices = sheet_choices(request.query_params, tex=tex, digits=digits, places=view.get("places"))
            title.append(f"{choices.template or named} worksheet")
            return pool.download(data, kind, digits, choices)

        def file(result: Result) -> Response:
            return Response(result.data, media_type=media,
                            headers={"Content-Disposition": disposition(title[0], extension)})

        return await _worked(request, made, file)

    routes = [Route("/", index, methods=["GET", "HEAD"]),
              Route("/toml", _toml, methods=["POST"]),
              Route("/check", check, methods=["POST"]),
              Route("/download/{kind}", download, methods=["POST"]),
              *_static_routes(),
              Route("/derive", derive, methods=["POST"])]
    return Guard(Starlette(routes=routes), hosts)


def _static_routes() -> list[Route]:
    """The page's script, style and icon files (read once), and ``/favicon.ico``: the icon a
    browser asks for by itself (the page links the same SVG)."""
    static = {name: resources.files(__package__).joinpath("static", name).read_bytes() for name in STATIC}

    async def static_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in static:
            return PlainTextResponse("not found", 404)
        return Response(static[name], media_type=STATIC[name])

    async def favicon(request: Request) -> Response:
        return Response(static["favicon.svg"], media_type=STATIC["favicon.svg"])

    return [Route("/static/{name}", static_file, methods=["GET", "HEAD"]),
            Route("/favicon.ico", favicon, methods=["GET", "HEAD"])]


async def _worked(request: Request, work: Callable[[Any], Awaitable[Result]],
                  reply: Callable[[Result], Response] | None = None) -> Response:
    """A request's body read under the cap, the work done in the pool, and every refusal
    answered as the page shows it (the CLI's one line; 503 when the queue is full)."""
    body = await _body(request)
    if body is None:
        return _too_big()
    try:
        result = await work(parse_problem_json(body))
    except SymattnError as exc:
        return _error(one_line(exc), 422)
    except TooLarge as exc:
        return _error(str(exc), 422, field=None)
    except Busy as exc:
        return _error(str(exc), 503, field=None)
    if result.error is not None:
        return _error(result.error, 422)
    return reply(result) if reply is not None else JSONResponse({"html": result.html})


async def _toml(request: Request) -> Response:
    """The problem file of the problem posted (no worker: nothing is worked)."""
    body = await _body(request)
    if body is None:
        return _too_big()
    try:
        text = toml_of(parse_problem_json(body))
    except SymattnError as exc:
        return _error(one_line(exc), 422)
    return Response(text, media_type="application/toml; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="problem.toml"'})


MAX_PAGE_DIGITS = 30     # the page's digits (the CLI takes more: its own time is the user's)


def _digits(text: str) -> int:
    if re.fullmatch("[0-9]{1,3}", text) is None or not 1 <= int(text) <= MAX_PAGE_DIGITS:
        raise ProblemError(f"digits must be a whole number from 1 to {MAX_PAGE_DIGITS}, got "
                           f"{text[:20]!r}: use the CLI's --digits for more")
    return int(text)


def _error(message: str, status: int, *, field: str | None | bool = True) -> Response:
    where = field_of(message) if field is True else None
    return JSONResponse({"error": message, "field": where}, status_code=status)

