"""Issue 13's benchmark set in one go: every figure beside its bare baseline, one table.

Runs bench_answers, bench_sessions, bench_race and bench_list (each a subprocess, with the
same --database and --repeat), keeps each one's full output in --log-dir, and prints the
rows of their `RESULT` lines together: figure | Kandev | bare | ratio | target, then the
Kandev-only checks, and one `RESULT summary {json}` line.

Run:  .venv/bin/python -m bench.summary [--database sqlite,postgres] [--repeat 3]
          [--only answers,sessions,race,list] [--full] [--with 'answers:--blocked 1000']
(--full: the issue's sizes — 100 sessions, 1,000 blocked agents, 200 list calls.)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, format_check, format_rows, print_json_line

SCRIPTS = {
    "answers": ("bench.bench_answers", [], ["--blocked", "1000", "--samples", "50"]),
    "sessions": ("bench.bench_sessions", [], ["--sessions", "100", "--alone", "50"]),
    "race": ("bench.bench_race", [], ["--bundles", "50", "--answerers", "500"]),
    "list": ("bench.bench_list", [], ["--calls", "200"]),
}


def commit() -> str:
    """HEAD (marked when src/ has uncommitted edits); BENCH_COMMIT names it for a snapshot
    (`git archive` of a commit, run with PYTHONPATH=<snapshot>/src:<snapshot>)."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src")
    return git("rev-parse", "--short", "HEAD") + (" (src/ modified)" if dirty else "")


def run(name: str, argv: list[str], log: Path) -> dict[str, Any] | None:
    """One benchmark; its output goes to `log` (and progress lines to the terminal)."""
    started = time.perf_counter()
    result = None
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if line.startswith(f"RESULT {name} "):
                result = json.loads(line.split(" ", 2)[2])
            elif line.startswith("run ") or line.startswith("=="):
                print(f"  [{name}] {line.rstrip()}", flush=True)
        code = proc.wait()
    elapsed = time.perf_counter() - started
    status = "ok" if code == 0 and result is not None else f"FAILED (exit {code})"
    print(f"{name}: {status} in {elapsed:.0f} s, log {log}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="sqlite,postgres")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCRIPTS))
    parser.add_argument("--full", action="store_true", help="the issue's sizes (slow)")
    parser.add_argument(
        "--with",
        dest="extra",
        action="append",
        default=[],
        metavar="NAME:ARGS",
        help="extra arguments for one benchmark, e.g. --with 'answers:--blocked 1000'",
    )
    parser.add_argument("--log-dir", default="")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    extra: dict[str, list[str]] = {}
    for item in args.extra:
        name, _, rest = item.partition(":")
        extra.setdefault(name.strip(), []).extend(shlex.split(rest))
    for name in [*names, *extra]:
        if name not in SCRIPTS:
            raise SystemExit(f"--only: unknown {name!r} ({', '.join(SCRIPTS)})")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="kandev-bench-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    measured = commit()
    load_before = os.getloadavg()
    print(f"commit {measured}; logs in {log_dir}; load {load_before[0]:.1f}", flush=True)

    results: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    for name in names:
        module, default, full = SCRIPTS[name]
        argv = [module, "--database", args.database, "--repeat", str(args.repeat)]
        argv += full if args.full else default
        argv += extra.get(name, [])
        result = run(name, argv, log_dir / f"{name}.log")
        if result is None:
            failed.append(name)
        else:
            results[name] = result

    rows = [row for r in results.values() for row in r.get("rows", [])]
    checks = [c for r in results.values() for c in r.get("checks", [])]
    load = [round(v, 1) for v in (*load_before, *os.getloadavg())]
    print(
        f"\nissue 13: Kandev beside its bare same-stack baseline, medians of {args.repeat} runs "
        f"(commit {measured}; load average {load[0]} at the start, {load[3]} / {load[4]} "
        f"(1 / 5 min) at the end, {os.cpu_count()} cores)"
    )
    for line in format_rows(rows):
        print("  " + line)
    for c in checks:
        print(f"  {format_check(c)}")
    if failed:
        print(f"  FAILED: {', '.join(failed)} (see their logs)")
    print_json_line(
        "summary",
        commit=measured,
        repeat=args.repeat,
        load=load,
        rows=rows,
        checks=checks,
        failed=failed,
    )
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
