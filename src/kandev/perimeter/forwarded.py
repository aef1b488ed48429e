"""X-Forwarded-For / -Proto, believed only from the proxies named by --trust-proxy.

Anybody can send these headers; believing them from any peer lets a client pick its own
address (and so its own login rate-limit key). uvicorn's own handling is off (see
`serving.uvicorn_options`): it trusts every loopback peer by default.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
FORWARDING_HEADERS = frozenset({b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"})
_NAMED = {"localhost": ("127.0.0.1/32", "::1/128")}


def parse_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as peers and X-Forwarded-For write it: `1.2.3.4`, `1.2.3.4:80`, `[::1]:80`,
    `::1`. None for anything else (`unknown`, obfuscated identifiers, garbage)."""
    value = value.strip()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> TrustedProxies:
        networks: list[IPNetwork] = []
        for entry in entries:
            for item in _NAMED.get(entry.lower(), (entry,)):
                try:
                    networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
                except ValueError:
                    raise ValueError(
                        f"trusted proxies: not an IP address or network: {entry!r}"
                    ) from None
        return cls(tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        parsed = parse_address(address)
        return parsed is not None and any(parsed in network for network in self.networks)

    def client_address(self, forwarded_for: list[str]) -> str | None:
        """The rightmost X-Forwarded-For hop that is not one of our proxies: everything left
        of it was written by the client and can be anything."""
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(hops):
            parsed = parse_address(hop)
            if parsed is None:
                return None  # a trusted proxy wrote garbage: keep the peer's own address
            if not any(parsed in network for network in self.networks):
                return str(parsed)
        # Every hop is a proxy of ours: the leftmost is as close to the client as we get.
        first = parse_address(hops[0]) if hops else None
        return str(first) if first is not None else None
