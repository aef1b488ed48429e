"""PerimeterMiddleware: the outermost ASGI layer, in front of every route (CONTRACT §8).

In order: forwarded headers (believed only from trusted proxies), Host (421), Origin on
state-changing methods (403), NUL in path or query (400), body size (413) while the body is
read, NUL in the body (400) — then the app, with the body replayed. Any exception that
escapes the app before it answered becomes a JSON 500. Plain ASGI, so the app runs in the
caller's task and context (the auth identity contextvar depends on it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from functools import lru_cache

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kandev.errors import ServerBusy
from kandev.perimeter.body import BodyTooLarge, ClientGone, declared_length, read_body, replay
from kandev.perimeter.forwarded import FORWARDING_HEADERS
from kandev.perimeter.nul import NUL, nul_in_form, nul_in_json, nul_in_query, nul_message
from kandev.perimeter.policy import PerimeterPolicy, checks_body_for_nul
from kandev.perimeter.responses import send_error

logger = logging.getLogger(__name__)

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HOST_NOT_ALLOWED = "host not allowed"
# Said to the refused client itself: the name it used is usually one the user meant to allow.
HOST_HINT = (
    "to serve this host name, start Kandev with --allowed-hosts NAME or set "
    "KANDEV_ALLOWED_HOSTS=NAME (comma-separated names; see docs/security.md)"
)
CROSS_ORIGIN = "cross-origin request refused"
TOO_LARGE = "request body too large"
INTERNAL = "internal error"
_FORM = b"application/x-www-form-urlencoded"
_MAX_NOTED_HOSTS = 32  # a flood of made-up names must not flood the log
_MAX_NOTED_HOST_LENGTH = 100
_VERDICT_CACHE_SIZE = 256


class _Headers:
    """The few request headers the perimeter reads, in one pass over the scope."""

    __slots__ = (
        "chunked",
        "content_type",
        "fetch_site",
        "forwarded",
        "forwarded_for",
        "forwarded_proto",
        "host",
        "host_count",
        "length",
        "origin",
    )

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.host: bytes | None = None
        self.host_count = 0
        self.origin: bytes | None = None
        self.fetch_site = b""
        self.length: bytes | None = None
        self.chunked = False
        self.content_type = b""
        self.forwarded_for: list[str] = []
        self.forwarded_proto: str | None = None
        self.forwarded = False  # any X-Forwarded-* header at all
        for name, value in raw:
            if name == b"host":
                self.host, self.host_count = value, self.host_count + 1
            elif name == b"origin":
                self.origin = value
            elif name == b"sec-fetch-site":
                self.fetch_site = value.strip().lower()
            elif name == b"content-length":
                self.length = value
            elif name == b"transfer-encoding":
                self.chunked = True
            elif name == b"content-type":
                self.content_type = value.lower()
            elif name in FORWARDING_HEADERS:
                self.forwarded = True
                if name == b"x-forwarded-for":
                    self.forwarded_for.append(value.decode("latin-1"))
                elif name == b"x-forwarded-proto":
                    self.forwarded_proto = value.decode("latin-1")


class _Tracked:
    """The server's `send`, noting how far the response got: its status once started, and
    whether its last body part went out (what the error handling needs to know)."""

    __slots__ = ("complete", "send", "status")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 0  # 0 before the response starts
        self.complete = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.complete = True
        await self.send(message)


class PerimeterMiddleware:
    def __init__(self, app: ASGIApp, policy: PerimeterPolicy) -> None:
        self.app = app
        self.policy = policy
        self._refused_hosts: set[str] = set()
        # Clients send the same few Host / Origin values over and over: remember the verdicts.
        self._host_verdict = lru_cache(maxsize=_VERDICT_CACHE_SIZE)(policy.hosts.allows)
        self._origin_verdict = lru_cache(maxsize=_VERDICT_CACHE_SIZE)(policy.hosts.allows_origin)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not itself a coroutine: it hands back the one that serves the request, so a
        # request waiting for hours (an agent's ask) carries no dispatching frame.
        if scope["type"] == "http":
            return self._http(scope, receive, send)
        if scope["type"] == "websocket":
            return self._websocket(scope, receive, send)
        return self.app(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _Headers(scope["headers"])
        self._apply_forwarding(scope, headers)
        if not self._host_allowed(headers):
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # While the app runs (for hours, for an agent waiting on a question) only this
        # frame and a slotted `_Tracked` stay alive: the checks ran in `_admit`'s frame,
        # which is gone by then.
        tracked = _Tracked(send)
        try:
            admitted = await self._admit(scope, receive, tracked)
            if admitted is not None:
                await self.app(scope, admitted, tracked)
        except ServerBusy as exc:
            # Raised before the app answered (e.g. by the auth middleware's token lookup
            # waiting on a full database queue): as retryable as the app's own 503.
            if tracked.complete:
                return  # the app's own handler answered it (503, Retry-After)
            if tracked.status:
                raise
            retry = [(b"retry-after", str(exc.retry_after_seconds).encode())]
            await send_error(send, 503, exc.message, extra_headers=retry)
        except Exception:
            if tracked.complete:
                # A whole answer is out. A 500 is the app's error handler, which logged the
                # traceback before answering and re-raises only so servers can log it: once
                # is enough, and the connection can be kept.
                if tracked.status != 500:
                    logger.exception("error after answering %s %s", scope["method"], scope["path"])
                return
            if tracked.status:
                raise  # half a response is out: the server logs it and drops the connection
            logger.exception("unhandled error on %s %s", scope["method"], scope["path"])
            await send_error(send, 500, INTERNAL)

    async def _admit(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """The checks, in order: the `receive` the app is to read from (the body replayed
        when it had to be read), or None when the perimeter has answered the request."""
        headers = _Headers(scope["headers"])
        self._apply_forwarding(scope, headers)
        if not self._host_allowed(headers):
            self._note_refused_host(headers.host)
            await send_error(send, 421, HOST_NOT_ALLOWED, HOST_HINT)
            return None
        method = scope["method"]
        if method in STATE_CHANGING and self._cross_origin(headers):
            await send_error(send, 403, CROSS_ORIGIN)
            return None
        field = _nul_in_target(scope)
        if field is not None:
            await send_error(send, 400, nul_message(field))
            return None
        if headers.length is None and not headers.chunked and method not in STATE_CHANGING:
            return receive  # no body (GET, SSE): nothing to read
        limit = self.policy.max_body_bytes
        length = declared_length(headers.length)
        if length is not None and length > limit:
            await send_error(send, 413, TOO_LARGE)
            return None
        try:
            body = await read_body(receive, limit)
        except BodyTooLarge:
            await send_error(send, 413, TOO_LARGE)
            return None
        except ClientGone:
            return None
        if checks_body_for_nul(scope["path"]):
            field = _nul_in_body(body, headers.content_type)
            if field is not None:
                await send_error(send, 400, nul_message(field))
                return None
        return replay(body, receive)  # it holds the body until the app reads it

    def _apply_forwarding(self, scope: Scope, headers: _Headers) -> None:
        """Rewrite the client (and scheme) from a trusted proxy's headers; from anyone
        else, drop the headers so nothing downstream can be fooled by them."""
        peer = scope.get("client")
        if peer and self.policy.proxies and self.policy.proxies.trusts(peer[0]):
            if headers.forwarded_for:
                client = self.policy.proxies.client_address(headers.forwarded_for)
                if client is not None:
                    scope["client"] = (client, 0)
            if headers.forwarded_proto is not None:
                proto = headers.forwarded_proto.split(",")[-1].strip().lower()
                if proto in ("http", "https"):
                    ws = scope["type"] == "websocket"
                    scope["scheme"] = proto.replace("http", "ws") if ws else proto
            return
        if headers.forwarded:
            scope["headers"] = [h for h in scope["headers"] if h[0] not in FORWARDING_HEADERS]

    def _host_allowed(self, headers: _Headers) -> bool:
        # No Host (HTTP/1.0) or several: refuse — every browser and HTTP/1.1 client sends one.
        if headers.host is None or headers.host_count != 1:
            return False
        return self._host_verdict(headers.host.decode("latin-1"))

    def _note_refused_host(self, host: bytes | None) -> None:
        """Say once per name (for the first few names) how to allow it: a 421 for the name
        users actually type, such as a LAN address, is otherwise a puzzle."""
        if host is None or len(self._refused_hosts) >= _MAX_NOTED_HOSTS:
            return
        name = host.decode("latin-1")[:_MAX_NOTED_HOST_LENGTH]
        if name not in self._refused_hosts:
            self._refused_hosts.add(name)
            logger.warning(
                "refused Host %r; if that is this server, add it to --allowed-hosts "
                "(KANDEV_ALLOWED_HOSTS)",
                name,
            )

    def _cross_origin(self, headers: _Headers) -> bool:
        if headers.fetch_site == b"cross-site":
            return True
        if headers.origin is None:
            return False  # curl, SDKs and same-origin GET-like navigations send none
        return not self._origin_verdict(headers.origin.decode("latin-1"))


def _nul_in_target(scope: Scope) -> str | None:
    if NUL in scope["path"]:
        return "path"
    return nul_in_query(scope.get("query_string", b""))


def _nul_in_body(body: bytes, content_type: bytes) -> str | None:
    if content_type.startswith(_FORM):
        return nul_in_form(body)
    if content_type.startswith(b"multipart/"):
        return None
    return nul_in_json(body)  # FastAPI reads a body without Content-Type as JSON too
