"""The TLS setting of Kandev's own HTTP clients: nothing loaded for plain http, still
verifying, and the default verifying context for https."""

from __future__ import annotations

import ssl

import httpx
import httpx2
import pytest

from kandev.agents.http_tls import tls_verify_for


@pytest.mark.parametrize("url", ["http://127.0.0.1:8420", " HTTP://localhost/mcp"])
def test_plain_http_gets_a_bare_context_that_still_verifies(url: str) -> None:
    verify = tls_verify_for(url)

    assert isinstance(verify, ssl.SSLContext)
    assert verify.cert_store_stats()["x509_ca"] == 0  # no CA bundle read
    assert verify.verify_mode == ssl.CERT_REQUIRED and verify.check_hostname
    assert tls_verify_for(url) is verify  # built once per process


def test_https_gets_the_default_verifying_context() -> None:
    assert tls_verify_for("https://kandev.example.com") is True


def test_both_http_libraries_take_it() -> None:
    verify = tls_verify_for("http://127.0.0.1:1")
    httpx.Client(verify=verify).close()
    client = httpx2.AsyncClient(verify=verify)
    assert client is not None
