"""The perimeter's settings, resolved once from `Settings` (CONTRACT §8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kandev.perimeter.forwarded import TrustedProxies
from kandev.perimeter.hosts import AllowedHosts, comma_list

if TYPE_CHECKING:
    from kandev.config import Settings

# The MCP endpoints answer a bad argument with a tool result, not a REST 400 (CONTRACT §5):
# their NUL check runs per tool call (kandev.mcp.server), not on the raw body.
TOOL_CALL_PATHS = frozenset({"/mcp", "/agent/mcp"})
_TOOL_CALL_PREFIXES = tuple(f"{path}/" for path in sorted(TOOL_CALL_PATHS))


@dataclass(frozen=True)
class PerimeterPolicy:
    hosts: AllowedHosts
    proxies: TrustedProxies = field(default_factory=TrustedProxies)
    max_body_bytes: int = 1024 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> PerimeterPolicy:
        return cls(
            hosts=allowed_hosts(settings),
            proxies=TrustedProxies.parse(comma_list(settings.trust_proxy)),
            max_body_bytes=max(0, settings.max_body_bytes),
        )


def allowed_hosts(settings: Settings) -> AllowedHosts:
    """The one allowed-host list: loopback, the bound host, the public URL's host, and
    --allowed-hosts."""
    return AllowedHosts.build(
        bound_host=settings.host,
        public_url=settings.public_url,
        extra=comma_list(settings.allowed_hosts),
    )


def checks_body_for_nul(path: str) -> bool:
    return path not in TOOL_CALL_PATHS and not path.startswith(_TOOL_CALL_PREFIXES)
