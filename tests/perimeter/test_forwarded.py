"""X-Forwarded-For / -Proto: ignored unless the peer is a --trust-proxy address."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import free_port
from tests.perimeter.conftest import ADMIN
from tests.server_process import start_serve, wait_for_health

WRONG = {"email": ADMIN["email"], "password": "wrong-password"}


async def failed_logins(client: httpx.AsyncClient, forwarded_for: list[str]) -> list[int]:
    statuses = []
    for address in forwarded_for:
        r = await client.post(
            "/api/v1/auth/login", json=WRONG, headers={"X-Forwarded-For": address}
        )
        statuses.append(r.status_code)
    return statuses


async def test_kandev_serve_ignores_forwarded_for_from_loopback(tmp_path: Path) -> None:
    """The real CLI server: rotating X-Forwarded-For does not rotate the rate-limit key."""
    port = free_port()
    proc = start_serve(tmp_path / "home", port, "--auth", env={"KANDEV_LOGIN_ATTEMPTS": "3"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await client.post("/api/v1/auth/setup", json=ADMIN)).status_code == 200
            statuses = await failed_logins(client, [f"10.0.0.{i}" for i in range(1, 6)])
            assert statuses == [401, 401, 401, 429, 429]
            r = await client.post(
                "/api/v1/auth/login", json=ADMIN, headers={"X-Forwarded-Proto": "https"}
            )
            assert r.status_code == 429  # the right password too, until the window passes
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


async def test_forwarded_headers_are_ignored_by_default(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    client = http(start(auth=True, login_attempts=3).url)
    r = await client.post("/api/v1/auth/setup", json=ADMIN, headers={"X-Forwarded-Proto": "https"})
    assert r.status_code == 200
    assert "secure" not in r.headers["set-cookie"].lower()  # plain http, whatever it claims
    assert await failed_logins(client, ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]) == [
        401,
        401,
        401,
        429,
    ]


async def test_forwarded_headers_are_honoured_from_a_trusted_proxy(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    client = http(start(auth=True, login_attempts=2, trust_proxy="127.0.0.1, 10.0.0.0/8").url)
    r = await client.post(
        "/api/v1/auth/setup",
        json=ADMIN,
        headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"},
    )
    assert r.status_code == 200
    assert "secure" in r.headers["set-cookie"].lower()
    # Each client behind the proxy has its own budget…
    assert await failed_logins(client, ["1.1.1.1", "2.2.2.2", "3.3.3.3"]) == [401, 401, 401]
    # …keyed by the rightmost hop that is not one of our proxies (10.0.0.0/8 here, a
    # different one each time): what the client wrote left of it does not matter either.
    chain = [f"198.51.100.{i}, 192.0.2.7, 10.1.2.{i}" for i in range(4)]
    assert await failed_logins(client, chain) == [401, 401, 429, 429]
