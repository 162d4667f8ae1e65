"""docs/tour.md, run: each of its shell commands against a real `omni-errors serve`, its output, and the
log lines it quotes, read from the page itself, so that the page and the server cannot drift apart.

The page's console blocks are parsed: a `$ ` line is a command (with its `\\` continuations and
heredoc), the lines after it up to the next command, comment or blank line are its output (blank
lines of the output, between server-sent events, left out), `…` standing for any text within a
line and a line of `…` alone for any lines. Each command runs in bash with the
page's `localhost:8000` pointed at the server. Commands that start servers (`omni-errors ...`) are
what the fixture does itself. Two servers, started side by side: one as the page starts it first
(no request faults, for the block that shows that refusal), one with `--allow-request-faults` for
the rest. The page's fatal request (an OOM in code2wav) ends the second server, which must exit
with the code the page names and have logged the lines the page quotes; `/health` of the dead
pipeline, which the page shows only until the listener closes, is checked by
`tests/pipeline/test_health.py` against the same page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from pipeline_server import Server, start_server, stop_server

TOUR = Path(__file__).resolve().parents[2] / "docs" / "tour.md"
COMMAND_TIMEOUT = 120.0  # a 20 MB upload or an SSE stream on two shared cores
FATAL_MARK = "X-Omni-Fault: oom;stage=2"
NO_FAULTS_MARK = "without --allow-request-faults"


@dataclass(frozen=True)
class Command:
    text: str  # as a shell runs it
    output: tuple[str, ...]  # as the page shows it
    comment: str  # the `#` lines just above it


def console_blocks(page: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"^```console\n(.*?)^```", page, flags=re.S | re.M)]


def commands(page: str) -> list[Command]:
    """Every `$ ` command of the page's console blocks, in order, with its output and comment."""
    found: list[Command] = []
    for lines in console_blocks(page):
        i, comment = 0, ""
        while i < len(lines):
            line = lines[i]
            if not line:
                i += 1
                continue
            if line.startswith("# "):
                comment, i = f"{comment}\n{line}".strip(), i + 1
                continue
            if not line.startswith("$ "):
                raise AssertionError(f"output without a command in docs/tour.md: {line!r}")
            text = [line[2:]]
            heredoc = re.search(r"<<'(\w+)'", line)
            while text[-1].endswith("\\") or (heredoc and text[-1] != heredoc.group(1)):
                i += 1
                text.append(lines[i])
            i += 1
            output = []
            while i < len(lines) and lines[i] and not lines[i].startswith(("$ ", "# ")):
                output.append(lines[i])
                i += 1
            found.append(Command("\n".join(text), tuple(output), comment))
            comment = ""
    return found


def output_pattern(lines: tuple[str, ...]) -> re.Pattern[str]:
    """The page's output as a pattern: `…` any text within a line, a line of `…` any lines."""
    parts = []
    for line in lines:
        if line == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"[^\n]*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.compile("".join(parts))


def log_pattern(line: str, port: int) -> re.Pattern[str]:
    """A log line the page quotes, as a pattern for a line of the server's log: its timestamp (`...`)
    and the process ids are the run's own."""
    line = line.removeprefix("... ").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    pattern = re.escape(line)
    pattern = re.sub(r"pid\\ \d+", r"pid\\ \\d+", pattern)
    pattern = re.sub(r"pids\\ \\\[[\d,\\ ]+\\\]", r"pids\\ \\[[\\d, ]+\\]", pattern)
    return re.compile(rf"^(?:\S+ \S+ )?{pattern}$", flags=re.M)


def run(command: Command, port: int, cwd: Path) -> str:
    text = command.text.replace("localhost:8000", f"127.0.0.1:{port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", text],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{command.text}\nexit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def check_output(command: Command, stdout: str) -> None:
    if not command.output:
        return
    # The page leaves out blank lines (the separators between server-sent events).
    text = "".join(f"{line}\n" for line in stdout.splitlines() if line)
    assert output_pattern(command.output).fullmatch(text), (
        f"docs/tour.md says\n$ {command.text}\n" + "\n".join(command.output) + f"\nbut the server answered\n{text}"
    )


@dataclass
class Servers:
    plain: Server
    faults: Server


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = [pool.submit(start_server), pool.submit(start_server, "--allow-request-faults")]
    running = [f.result() for f in started if f.exception() is None]
    try:
        for f in started:
            if f.exception() is not None:
                raise f.exception()  # type: ignore[misc]
        yield Servers(*running)
    finally:
        for server in running:
            if server.proc.poll() is None:
                stop_server(server)


PAGE = TOUR.read_text()
COMMANDS = commands(PAGE)
# What the fixture runs itself: the servers and the chaos runner, whose page blocks are not a client's.
CLIENT_COMMANDS = [c for c in COMMANDS if not c.text.startswith("omni-errors ")]
FATAL = next(c for c in CLIENT_COMMANDS if FATAL_MARK in c.text)
BEFORE_FATAL = CLIENT_COMMANDS[: CLIENT_COMMANDS.index(FATAL)]


def test_the_page_is_parsed() -> None:
    # Each section's commands are found, with their output: a page the parser misreads checks nothing.
    assert len(BEFORE_FATAL) >= 18
    assert sum(1 for c in BEFORE_FATAL if c.output) >= 12
    assert [c for c in COMMANDS if c.text.startswith("omni-errors serve")], "the page starts a server"


@pytest.mark.timeout(900)  # the two servers' start (importing vLLM) is this test's
def test_every_command_answers_as_the_page_says(servers: Servers, tmp_path: Path) -> None:
    for command in BEFORE_FATAL:
        server = servers.plain if NO_FAULTS_MARK in command.comment else servers.faults
        port = int(server.base.rsplit(":", 1)[1])
        check_output(command, run(command, port, tmp_path))


def test_the_fatal_failure_is_answered_and_ends_the_server_as_the_page_says(servers: Servers) -> None:
    # After the other test: the page's fatal request ends the server they share.
    server = servers.faults
    port = int(server.base.rsplit(":", 1)[1])
    with tempfile.TemporaryDirectory() as cwd:
        check_output(FATAL, run(FATAL, port, Path(cwd)))
    code = re.search(r"the server exits (\d+)", FATAL.comment)
    assert code is not None
    assert stop_server(server) == int(code.group(1))
    log = server.log.read_text()
    start = next(c for c in COMMANDS if c.text.startswith("omni-errors serve"))
    for line in [*start.output, *_quoted_log(PAGE).splitlines()]:
        assert log_pattern(line, port).search(log), f"docs/tour.md quotes a log line the server did not log:\n{line}"
    # The failure is logged once with its traceback, where it happened (the stage); nothing after it is.
    assert log.count("Traceback (most recent call last)") == 1, log


def _quoted_log(page: str) -> str:
    """The log lines the page quotes after the fatal failure (its plain ``` block)."""
    found = re.search(r"not the traceback again:\n\n```\n(.*?)^```", page, flags=re.S | re.M)
    assert found is not None
    return found.group(1)
