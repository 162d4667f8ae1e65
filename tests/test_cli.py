"""The `omni-errors` command line, run as users run it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omni_errors_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        pass_fds=pass_fds,
    )


def test_help_lists_the_commands() -> None:
    out = _cli("--help")
    assert out.returncode == 0
    for command in ("bench", "catalog", "serve", "chaos", "audit"):
        assert command in out.stdout


def test_catalog_prints_the_committed_catalogue() -> None:
    out = _cli("catalog")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")


def test_unknown_command_fails_with_usage() -> None:
    out = _cli("frobnicate")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr


def test_chaos_rejects_an_unknown_scenario_or_target() -> None:
    out = _cli("chaos", "no-such-scenario")
    assert out.returncode == 2
    assert "unknown scenario(s) no-such-scenario for target pipeline; choose from pr-fatal" in out.stderr
    out = _cli("chaos", "--target", "no-such-target")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr


def test_help_shows_the_two_host_commands() -> None:
    out = _cli("--help")
    assert "keys" in out.stdout and "stage" in out.stdout
    stage = _cli("stage", "--help")
    assert stage.returncode == 0
    assert "omni-errors stage code2wav --connect tcp://10.0.0.1:5570" in stage.stdout
    assert "--remote-stage code2wav" in _cli("serve", "--help").stdout


def test_keys_writes_private_secret_files(tmp_path: Path) -> None:
    out = _cli("keys", str(tmp_path / "k"), "serve", "code2wav")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "k" / "code2wav.key_secret").stat().st_mode & 0o777 == 0o600
    again = _cli("keys", str(tmp_path / "k"), "serve")
    assert again.returncode == 1 and "already exist; pass --force to replace them" in again.stderr


def test_plaintext_links_are_refused_off_loopback(tmp_path: Path) -> None:
    out = _cli("serve", "--remote-stage", "code2wav", "--link-plaintext", "--link-bind", "tcp://169.254.0.1:5570")
    assert out.returncode == 2
    assert "only allowed on a loopback address (127.0.0.0/8 or ::1), not '169.254.0.1'" in out.stderr
    out = _cli("stage", "code2wav", "--plaintext", "--connect", "tcp://10.1.2.3:5570")
    assert out.returncode == 2 and "only allowed on a loopback address" in out.stderr


def test_serve_refuses_a_descriptor_that_is_not_a_listening_socket() -> None:
    out = _cli("serve", "--fd", "987")
    assert out.returncode == 2 and "omni-errors serve: --fd 987: Bad file descriptor" in out.stderr
    with socket.socket() as unbound:  # a TCP socket, neither bound nor listening
        fd = str(unbound.fileno())
        out = _cli("serve", "--fd", fd, pass_fds=(unbound.fileno(),))
    assert out.returncode == 2 and f"omni-errors serve: --fd {fd}: not a listening TCP socket" in out.stderr


def test_stage_reports_a_missing_or_open_key(tmp_path: Path) -> None:
    out = _cli("stage", "code2wav", "--key", str(tmp_path / "nope.key_secret"), "--server-key", str(tmp_path / "s"))
    assert out.returncode == 2 and "does not exist (create keys with `omni-errors keys`)" in out.stderr
    assert _cli("keys", str(tmp_path), "s").returncode == 0
    (tmp_path / "s.key_secret").chmod(0o644)
    out = _cli("stage", "code2wav", "--key", str(tmp_path / "s.key_secret"), "--server-key", str(tmp_path / "s.key"))
    assert out.returncode == 2 and "is readable by others (mode 0644)" in out.stderr


def test_a_remote_stage_host_never_imports_vllm() -> None:
    probe = (
        "import sys, omni_errors_cli, omni_errors_tools.lifecycle.remote.stage_side, omni_errors_tools.pipeline.stages;"
        "omni_errors_cli.build_parser();"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'fastapi', 'uvicorn')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_a_layer_command_imports_only_its_own_layer(tmp_path: Path) -> None:
    (tmp_path / "stage.py").write_text("raise ValueError('boom')\n", encoding="utf-8")
    script = (
        "import sys; from omni_errors_cli import main; "
        f"code = main(['audit', {str(tmp_path)!r}, '--no-cache', '--exit-zero', '--no-progress']); "
        "print(sorted(m for m in sys.modules if m.startswith(('omni_errors_tools', 'omni_errors_vllm_omni')))); "
        "sys.exit(code)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"


def test_every_installed_command_is_one_the_cli_knows_the_distribution_of() -> None:
    from omni_errors_cli import PROVIDERS, installed_commands

    # Here every distribution is installed: each command it registers is in PROVIDERS, so that where
    # one is missing the CLI names the distribution to install (tests/install runs that case).
    assert installed_commands().keys() == PROVIDERS.keys()
