"""The server settles its heap once started (kandev.heap): the startup heap is frozen out of
the collector's generations; the collector's thresholds stay CPython's (a higher young
threshold cost a waiting agent ~2 KiB, see kandev.heap)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from kandev.heap import settle_heap
import kandev.app  # the server's modules, as `kandev serve` has them by then
before, thresholds = gc.get_freeze_count(), gc.get_threshold()
settle_heap()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(),
                  "thresholds": [thresholds, gc.get_threshold()]}))
"""


def test_settle_heap_freezes_what_startup_left_and_keeps_the_thresholds() -> None:
    # Its own interpreter: freezing the test process's heap would outlive this test.
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["before"] == 0
    assert probe["frozen"] > 50_000, probe  # the imported modules' objects, at least
    before, after = probe["thresholds"]
    assert after == before and after[0] == 700, probe  # CPython's, untouched
