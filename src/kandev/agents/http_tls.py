"""The TLS setting of Kandev's own HTTP clients (the CLI's REST and MCP clients, the demo
agent's MCP client).

httpx builds a verifying SSL context for every client it makes, loading the system CA
bundle: 20-50 ms, even for a plain `http://` URL that never uses it. For `http://` these
clients get a bare client context instead (no CAs loaded, microseconds), so nothing is paid
for TLS that is not spoken. It still verifies: were such a client ever sent to an `https://`
URL, the handshake would fail (no CA to trust), never connect unverified.
"""

from __future__ import annotations

import ssl
from functools import cache


def tls_verify_for(url: str) -> ssl.SSLContext | bool:
    """`verify=` for an httpx / httpx2 client talking to `url`: True (the default verifying
    context) for https, the bare context for plain http."""
    if url.strip().lower().startswith("https://"):
        return True
    return _plain_http_context()


@cache
def _plain_http_context() -> ssl.SSLContext:
    # PROTOCOL_TLS_CLIENT: hostname check and CERT_REQUIRED on, and no CA to trust.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
