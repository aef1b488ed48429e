"""Fault injection for crash tests: `KANDEV_FAULT_INJECT=<point>` kills the server there.

The named points sit on the delivery path of an answer (docs/questions.md, "Delivery
guarantees"): `after_claim` (the claim committed, nothing handed over yet), `after_flush`
(the tool result was written to the agent, the delivered mark not yet), `after_resume_sent`
(a resume prompt was written to the agent's stdin, the delivered mark not yet). Unset (the
default) every point is a no-op. Read once, at import.
"""

from __future__ import annotations

import os
import signal

_INJECTED = os.environ.get("KANDEV_FAULT_INJECT", "")


def fault_point(name: str) -> None:
    """SIGKILL this process if the fault named `name` is injected."""
    if _INJECTED and name == _INJECTED:
        os.kill(os.getpid(), signal.SIGKILL)
