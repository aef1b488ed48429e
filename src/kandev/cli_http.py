"""What the terminal commands share: the server URL and token options, one REST client per
process, and failures said in one line (CONTRACT §12).

Exit codes: 1 when the server refused the request or could not be reached, 2 for a usage
error (Typer's own, and a `--url` that is not a URL). httpx is imported on first use, so
`kandev --help` does not pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8420"
URL_OPTION = typer.Option(
    DEFAULT_URL,
    "--url",
    envvar="KANDEV_URL",
    help="The Kandev server's root URL (a URL ending in /mcp is accepted too).",
)
TOKEN_OPTION = typer.Option(
    "", "--token", envvar="KANDEV_TOKEN", help="Personal access token (needed when auth is on)."
)
JSON_OPTION = typer.Option(False, "--json", help="Print the JSON object or list, not a table.")
# Suffixes people paste from docs/mcp.md or the settings page; the CLI wants the root.
_ENDPOINT_SUFFIXES = ("/agent/mcp", "/mcp", "/api/v1")


class CommandFailed(Exception):
    """A failure already phrased as the one line to print, with its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def root_url(url: str) -> str:
    """The server root from what the user typed: `http://h:p`, `http://h:p/`, `…/mcp`."""
    cleaned = url.strip().rstrip("/")
    scheme, sep, rest = cleaned.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise CommandFailed(
            f"--url: expected the server's URL, like {DEFAULT_URL} (got {url!r})", exit_code=2
        )
    for suffix in _ENDPOINT_SUFFIXES:
        if cleaned.endswith(suffix) and cleaned.count("/") > 2:
            cleaned = cleaned[: -len(suffix)].rstrip("/")
            break
    return cleaned


def refusal_message(status: int, server_message: str, *, token_given: bool) -> str:
    """The line for a request the server answered with an error status."""
    if status == 401:
        if token_given:
            return f"the token was refused (invalid or expired): {server_message}"
        return "authentication required: pass --token or set KANDEV_TOKEN"
    if status == 421:
        return f"{server_message}: the server does not answer this host name (see --allowed-hosts)"
    return server_message or f"the server answered {status}"


def unreachable_message(url: str, exc: BaseException) -> str:
    """The line for a server that did not answer at all (httpx's or the MCP SDK's httpx2's
    transport errors alike)."""
    if _refused(exc):
        reason = "connection refused"
    elif "Timeout" in type(exc).__name__:
        reason = "timed out"
    else:
        reason = str(exc) or type(exc).__name__
    return f"could not reach Kandev at {url}: {reason} (is `kandev serve` running?)"


def _refused(exc: BaseException | None, depth: int = 0) -> bool:
    """Whether a connection refusal is anywhere in the exception's causes."""
    if exc is None or depth > 10:
        return False
    if isinstance(exc, ConnectionRefusedError) or "connection refused" in str(exc).lower():
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_refused(e, depth + 1) for e in exc.exceptions)
    return _refused(exc.__cause__ or exc.__context__, depth + 1)


def error_text(response: httpx.Response) -> str:
    """The server's reason for an error status: its `error`, else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200]
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"]
    return json.dumps(body)[:200]


class KandevClient:
    """REST calls to one server. The httpx client is made on the first call and reused."""

    def __init__(self, url: str, token: str) -> None:
        self.url = root_url(url)
        self.token = token.strip()
        self._http: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            import httpx

            from kandev.agents.http_tls import tls_verify_for

            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._http = httpx.Client(
                base_url=self.url,
                headers=headers,
                timeout=httpx.Timeout(30.0, connect=5.0),
                verify=tls_verify_for(self.url),  # no CA bundle loaded for http://
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def check(self, response: httpx.Response) -> None:
        if response.status_code >= 400:
            raise CommandFailed(
                refusal_message(
                    response.status_code, error_text(response), token_given=bool(self.token)
                )
            )

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        import httpx

        try:
            response = self.http.request(method, path, json=json_body, params=params)
        except httpx.TransportError as exc:
            raise CommandFailed(unreachable_message(self.url, exc)) from None
        self.check(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json_body=body if body is not None else {})

    def events(self, last_event_id: int | None = None, **params: str) -> Iterator[dict[str, Any]]:
        """The SSE stream of /api/v1/events as event payloads (each with its `id`), until
        the server closes it. Yields `{"type": "_connected"}` once the stream is open."""
        import httpx

        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        timeout = httpx.Timeout(30.0, connect=5.0, read=60.0)  # keepalives come every 15 s
        connected = False
        try:
            with self.http.stream(
                "GET", "/api/v1/events", params=params, headers=headers, timeout=timeout
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    self.check(response)
                connected = True
                yield {"type": "_connected"}
                data: list[str] = []
                for line in response.iter_lines():
                    if line == "":
                        if data:
                            yield json.loads("\n".join(data))
                            data = []
                    elif line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
        except httpx.TransportError as exc:
            # It answered (this stream, or the one this resumes), then went away.
            if connected or last_event_id is not None:
                raise CommandFailed(
                    f"lost the connection to Kandev at {self.url} (the server stopped or "
                    f"restarted: {str(exc) or type(exc).__name__}); the session goes on "
                    "without this watch"
                ) from None
            raise CommandFailed(unreachable_message(self.url, exc)) from None


_clients: dict[tuple[str, str], KandevClient] = {}


def client_for(url: str, token: str) -> KandevClient:
    """The process's client for this server and token (one connection pool per process)."""
    key = (url, token)
    if key not in _clients:
        _clients[key] = KandevClient(url, token)
    return _clients[key]


def run_command(action: Callable[[], T]) -> T:
    """Run a command body; a CommandFailed becomes `error: <line>` and its exit code."""
    try:
        return action()
    except CommandFailed as exc:
        fail(exc.message, exc.exit_code)


def fail(message: str, exit_code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(exit_code)


# --- output -------------------------------------------------------------------------------


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    return " ".join(text.split()) or "-"


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """An aligned table: `columns` is (heading, key) pairs; long cells are cut at 60."""
    body = [[_cut(cell(row.get(key))) for _, key in columns] for row in rows]
    headings = [heading for heading, _ in columns]
    widths = [max(len(c) for c in column) for column in zip(headings, *body, strict=False)]
    lines = [_line(headings, widths)] + [_line(r, widths) for r in body]
    return "\n".join(lines)


def render_record(record: dict[str, Any], keys: Sequence[tuple[str, str]]) -> str:
    """`label  value` lines, aligned, for one object."""
    width = max(len(label) for label, _ in keys)
    return "\n".join(f"{label:<{width}}  {cell(record.get(key))}" for label, key in keys)


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
