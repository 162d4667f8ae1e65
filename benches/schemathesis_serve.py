"""Schemathesis's own CLI against a real `omni-errors serve`, as a new user would run it; prints
the findings per check: how many operations failed it and how many failures.

The server is started the way the pipeline tests start it (a listener bound here on 127.0.0.1:0,
handed over with --fd), with --allow-request-faults off (the default), and stopped after the run.
The run is `schemathesis run URL/openapi.json --checks all --seed SEED --max-examples N --max-response-time S
--request-timeout S` plus a JSON report, whose failure summary is printed here:

    .venv/bin/python benches/schemathesis_serve.py --seed 24 --max-examples 60
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

STARTUP_TIMEOUT_S = 240.0


def start(log: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    with socket.create_server(("127.0.0.1", 0)) as listener, open(log, "wb") as f:
        port = int(listener.getsockname()[1])
        args = [sys.executable, "-m", "omni_errors_tools.pipeline", "serve", "--fd", str(listener.fileno()), *extra]
        proc = subprocess.Popen(
            args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(listener.fileno(),)
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    stop(proc)
    raise SystemExit(f"server did not start; log: {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def failures(report: dict[str, Any]) -> list[tuple[str, str, int, list[str]]]:
    """(code, title, failures, operations) for each kind of failure the run found."""
    return [(f["code"], f["title"], f["count"], sorted(f["operations"])) for f in report.get("failures") or []]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--max-examples", type=int, default=60)
    parser.add_argument(
        "--max-time", type=int, help="a time budget, seconds: fuzzing then repeats until it is spent (default: none)"
    )
    parser.add_argument("--deadline", type=float, default=30.0, help="seconds a response may take (default 30)")
    parser.add_argument("--keep", type=Path, help="keep the JSON report and the server log in this folder")
    parser.add_argument("serve_args", nargs="*", help="extra `omni-errors serve` arguments (after --)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="schemathesis-serve-"))
    work.mkdir(parents=True, exist_ok=True)
    proc, base = start(work / "server.log", args.serve_args)
    try:
        cmd = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{base}/openapi.json",
            "--checks",
            "all",
            "--seed",
            str(args.seed),
            "--max-examples",
            str(args.max_examples),
            "--max-response-time",
            str(args.deadline),
            "--request-timeout",
            str(args.deadline),
            "--workers",
            "1",
            "--report",
            "json",
            "--report-json-path",
            str(work / "report.json"),
            "--no-color",
        ]
        if args.max_time is not None:
            cmd += ["--max-time", str(args.max_time)]
        started = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        elapsed = time.monotonic() - started
    finally:
        stop(proc)
    (work / "schemathesis.out").write_text(run.stdout + run.stderr)
    report = json.loads((work / "report.json").read_text())
    print(f"schemathesis exit {run.returncode} in {elapsed:.0f} s; report and log in {work}")
    cases = report["test_cases"]
    print(f"{report['operations']['tested']} operations, {cases['generated']} test cases, seed {report['seed']}")
    for code, title, count, ops in failures(report):
        print(f"{code} {title}: {count} failure(s) in {len(ops)} operation(s): {', '.join(ops)}")
    if not report.get("failures"):
        print("no failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
