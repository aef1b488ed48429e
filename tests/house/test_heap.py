"""The server settles its heap once started (kandev.heap): the startup heap is frozen out of
the collector's generations and the young generation is collected less often."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from kandev.heap import YOUNG_THRESHOLD, settle_heap
import kandev.app  # the server's modules, as `kandev serve` has them by then
before = gc.get_freeze_count()
settle_heap()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(),
                  "young": gc.get_threshold()[0], "want": YOUNG_THRESHOLD}))
"""


def test_settle_heap_freezes_what_startup_left_and_raises_the_young_threshold() -> None:
    # Its own interpreter: freezing the test process's heap would outlive this test.
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["before"] == 0
    assert probe["frozen"] > 50_000, probe  # the imported modules' objects, at least
    assert probe["young"] == probe["want"] > 700, probe
