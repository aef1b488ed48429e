"""Which `Host` names this server answers (CONTRACT §8) — the DNS-rebinding defence.

A web page on attacker.example can make a browser resolve that name to 127.0.0.1 and then
talk to Kandev as a same-origin page; the only thing that gives it away is the `Host` header.
So every request must name a host we know we are: loopback, the bound address, the public
URL's host, or a name the operator listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# Binding to these means "every interface": none of them is a name a client would send.
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_NOT_IN_A_HOST = re.compile(r"[\s/@?#\\]")


def bracket(name: str) -> str:
    """IPv6 literals appear bracketed in Host and Origin headers."""
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def split_host(value: str) -> tuple[str, str] | None:
    """`name[:port]` → (normalized name, port or ""); None when it is not a host at all."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, sep, port = value.partition(":")
        rest = sep + port
    if rest:
        port = rest[1:]
        if rest[0] != ":" or not (port == "" or (port.isascii() and port.isdigit())):
            return None
    else:
        port = ""
    # "localhost." is the same name as "localhost"; an attacker owns neither.
    name = name.removesuffix(".")
    if not name or _NOT_IN_A_HOST.search(name):
        return None
    return name, port


@dataclass(frozen=True)
class AllowedHosts:
    """Names answered on any port, plus `name:port` pairs answered on that port only."""

    any_port: frozenset[str]
    exact: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def build(
        cls, *, bound_host: str = "", public_url: str = "", extra: Iterable[str] = ()
    ) -> AllowedHosts:
        any_port = set(LOOPBACK_NAMES)
        exact: set[tuple[str, str]] = set()
        if bound_host.strip() not in WILDCARD_BINDS:
            any_port.add(bracket(bound_host.strip().lower()))
        if public_url:
            hostname = urlsplit(public_url).hostname
            if hostname:
                any_port.add(bracket(hostname))
        for entry in extra:
            parsed = _parse_entry(entry)
            if parsed is None:
                raise ValueError(f"allowed hosts: not a host name: {entry!r}")
            name, port = parsed
            if port:
                exact.add((name, port))
            else:
                any_port.add(name)
        return cls(frozenset(any_port), frozenset(exact))

    def allows(self, host_header: str | None) -> bool:
        """True when a `Host` (or an Origin's host[:port]) names this server."""
        if host_header is None:
            return False
        parsed = split_host(host_header)
        if parsed is None:
            return False
        return parsed[0] in self.any_port or parsed in self.exact

    def allows_origin(self, origin: str) -> bool:
        """An `Origin` header names us: http(s) scheme and an allowed host[:port].
        `Origin: null` (sandboxed frames, file: pages, some redirects) is never us."""
        origin = origin.strip()
        if origin.lower() == "null":
            return False
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or "@" in parts.netloc:
            return False
        return self.allows(parts.netloc)


def _parse_entry(entry: str) -> tuple[str, str] | None:
    """An --allowed-hosts entry: `name`, `name:port`, `[v6]`, a bare IPv6, or a URL."""
    entry = entry.strip()
    if "://" in entry:
        entry = urlsplit(entry).netloc
    elif entry.count(":") > 1 and not entry.startswith("["):
        entry = bracket(entry)
    return split_host(entry)


def comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
