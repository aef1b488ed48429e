"""The perimeter's rules on their own: host names, proxies, NUL paths, the install point."""

from __future__ import annotations

import pytest

from kandev.config import Settings
from kandev.perimeter import PerimeterMiddleware, allowed_hosts, install_perimeter
from kandev.perimeter.forwarded import TrustedProxies
from kandev.perimeter.hosts import AllowedHosts, split_host
from kandev.perimeter.nul import find_nul, nul_in_json, nul_in_query


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost", ("localhost", "")),
        ("LocalHost:8420", ("localhost", "8420")),
        ("localhost.", ("localhost", "")),
        ("[::1]:80", ("[::1]", "80")),
        ("127.0.0.1:", ("127.0.0.1", "")),
        ("", None),
        ("[::1", None),
        ("::1", None),  # a bare IPv6 literal is not a Host
        ("host:80:80", None),
        ("host:8x", None),
        ("user@host", None),
        ("host/path", None),
    ],
)
def test_split_host(value: str, expected: tuple[str, str] | None) -> None:
    assert split_host(value) == expected


def test_allowed_hosts_come_from_one_place() -> None:
    hosts = allowed_hosts(
        Settings(
            host="192.168.1.5",
            public_url="https://Kandev.Example.com/base",
            allowed_hosts="a.example, b.example:8443, ::2, http://c.example:9000",
        )
    )
    for ok in ("localhost:1", "127.0.0.1", "[::1]", "192.168.1.5:8420", "kandev.example.com:443"):
        assert hosts.allows(ok), ok
    for ok in ("a.example:1", "b.example:8443", "[::2]:8420", "c.example:9000"):
        assert hosts.allows(ok), ok
    for bad in ("b.example", "c.example", "d.example", "192.168.1.6", None):
        assert not hosts.allows(bad), bad
    assert hosts.allows_origin("https://kandev.example.com")
    assert hosts.allows_origin("http://localhost:3000")
    for bad in ("null", "file://", "chrome-extension://abc", "http://x@localhost", "localhost"):
        assert not hosts.allows_origin(bad), bad


def test_a_wildcard_bind_adds_no_name() -> None:
    for bind in ("0.0.0.0", "::", ""):
        assert allowed_hosts(Settings(host=bind)) == AllowedHosts.build()


def test_bad_settings_fail_at_startup() -> None:
    with pytest.raises(ValueError, match="allowed hosts"):
        allowed_hosts(Settings(allowed_hosts="a b"))
    with pytest.raises(ValueError, match="trusted proxies"):
        TrustedProxies.parse(["proxy.internal"])


def test_client_address_is_the_rightmost_untrusted_hop() -> None:
    proxies = TrustedProxies.parse(["10.0.0.0/8", "localhost"])
    assert proxies.trusts("127.0.0.1") and proxies.trusts("::1") and proxies.trusts("10.9.9.9")
    assert not proxies.trusts("192.0.2.1") and not proxies.trusts("garbage")
    assert proxies.client_address(["6.6.6.6, 192.0.2.1, 10.0.0.2"]) == "192.0.2.1"
    assert proxies.client_address(["6.6.6.6", "192.0.2.1:5000, 10.0.0.2"]) == "192.0.2.1"
    assert proxies.client_address(["[2001:db8::1]:443"]) == "2001:db8::1"
    assert proxies.client_address(["10.0.0.3, 10.0.0.2"]) == "10.0.0.3"
    assert proxies.client_address(["6.6.6.6, unknown"]) is None  # keep the peer's address
    assert not TrustedProxies.parse([])


def test_find_nul_names_nested_fields() -> None:
    assert find_nul({"a": [{"b": "ok"}, {"c": "x\x00"}]}) == "a.1.c"
    assert find_nul({"a": {"k\x00": 1}}) == "a"
    assert find_nul({"a": ["ok", 1, None, True]}) is None
    assert nul_in_json(b'"\\u0000"') == "body"
    assert nul_in_json(b'{"a": "\\\\u0000"}') is None  # an escaped backslash, not a NUL
    assert nul_in_json(b"not json \\u0000") is None
    assert nul_in_query(b"a=1&b=x%00y") == "b"
    assert nul_in_query(b"a=1&b=%2500") is None


async def test_install_puts_the_perimeter_outside_starlettes_stack() -> None:
    from fastapi import FastAPI

    app = FastAPI()
    install_perimeter(app, Settings())
    stack = app.build_middleware_stack()
    assert isinstance(stack, PerimeterMiddleware)
    assert type(stack.app).__name__ == "ServerErrorMiddleware"


async def test_forwarding_headers_are_applied_from_trusted_peers_and_dropped_otherwise() -> None:
    import httpx

    from kandev.perimeter import PerimeterPolicy

    seen: dict[str, object] = {}

    async def echo(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        seen.update(client=scope["client"][0], scheme=scope["scheme"])
        seen["names"] = {name for name, _ in scope["headers"]}
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    forwarded = {
        "X-Forwarded-For": "203.0.113.9",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "attacker.example",
    }
    for trust, client, scheme, kept in (
        ("", "127.0.0.1", "http", False),
        ("127.0.0.1", "203.0.113.9", "https", True),
    ):
        app = PerimeterMiddleware(echo, PerimeterPolicy.from_settings(Settings(trust_proxy=trust)))
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            assert (await http.get("/", headers=forwarded)).status_code == 204
        assert (seen["client"], seen["scheme"]) == (client, scheme)
        assert (b"x-forwarded-host" in seen["names"]) is kept  # type: ignore[operator]


async def test_while_the_app_runs_only_the_perimeter_s_outer_frame_waits_with_it() -> None:
    """A request the app holds for hours (an agent's ask) keeps no frame of the perimeter's
    checks alive: they ran in `_admit`, gone before the app starts; `_http` stays."""
    import sys

    import httpx

    from kandev.perimeter import PerimeterPolicy

    frames: list[str] = []

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        assert (await receive())["body"] == b'{"a": 1}'  # the body, replayed
        frame = sys._getframe()
        while frame is not None:
            if frame.f_code.co_filename.endswith("perimeter/middleware.py"):
                frames.append(frame.f_code.co_name)
            frame = frame.f_back  # type: ignore[assignment]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    perimeter = PerimeterMiddleware(app, PerimeterPolicy.from_settings(Settings()))
    transport = httpx.ASGITransport(app=perimeter, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.post("/x", content=b'{"a": 1}')).status_code == 204
    assert frames == ["_http"]  # no frame of the checks (`_admit`, formerly `_guard`)
