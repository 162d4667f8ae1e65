"""The deployment's sockets (`omni_errors_vllm_omni.sockets`): CURVE with a ZAP allow-list from one setting.

Every process of a deployment reads `OMNI_ERRORS_VLLM_OMNI_KEYS` once, so each side here is a
fresh interpreter with the plugin's wrappers of pyzmq installed by the plugin's own patching code
(what `register()` does once zmq is imported): a head that binds a PULL and reports what reaches
it, and stages that connect a PUSH and send their name, over loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from omni_errors.security import keys
from omni_errors_tools.chaos.watch import free_port
from omni_errors_vllm_omni.settings import KEYS_ENV
from omni_errors_vllm_omni.sockets import load_keys

TIMEOUT = 120.0

_SIDE = textwrap.dedent(
    """
    import json, logging, sys, threading, time, zmq
    from omni_errors_vllm_omni.manifest import targets_by_module
    from omni_errors_vllm_omni.patching import apply

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
    apply(zmq, targets_by_module()["zmq"])
    role, endpoint = sys.argv[1], sys.argv[2]
    ctx = zmq.Context()
    if role == "stage":
        sock = ctx.socket(zmq.PUSH)
        sock.linger = 2000
        sock.connect(endpoint)
        sock.send(sys.argv[3].encode())
        sock.close()
        ctx.term()
        sys.exit(0)
    sock = ctx.socket(zmq.PULL)
    sock.bind(endpoint)
    print("bound", flush=True)
    got, deadline = [], time.monotonic() + float(sys.argv[3])
    while time.monotonic() < deadline:
        if sock.poll(100):
            got.append(sock.recv().decode())
    sock.close(linger=0)
    ended = threading.Event()
    threading.Thread(target=lambda: (ctx.term(), ended.set()), daemon=True).start()
    print(json.dumps({"received": sorted(got), "term_returned": ended.wait(10)}), flush=True)
    """
)


def _env(key_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != KEYS_ENV}
    if key_dir is not None:
        env[KEYS_ENV] = str(key_dir)
    return env


@pytest.fixture(scope="module")
def key_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Key directories as an operator lays them out: the head's, a stage's, an outsider's."""
    root = tmp_path_factory.mktemp("keys")
    made = root / "made"
    for name in ("head", "stage0", "outsider"):
        keys.generate(made, name)
    layout = {
        "head": ("head.key_secret", "head.key", "stage0.key"),
        "stage0": ("stage0.key_secret", "head.key"),
        "outsider": ("outsider.key_secret", "head.key"),
    }
    dirs = {}
    for name, files in layout.items():
        directory = root / name
        directory.mkdir(mode=0o700)
        for file in files:
            (directory / file).write_bytes((made / file).read_bytes())
            (directory / file).chmod(0o600 if file.endswith("_secret") else 0o644)
        dirs[name] = directory
    return dirs


def _head(key_dir: Path | None, endpoint: str, listen: float) -> subprocess.Popen[str]:
    head = subprocess.Popen(
        [sys.executable, "-c", _SIDE, "head", endpoint, str(listen)],
        env=_env(key_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert head.stdout is not None
    line = head.stdout.readline().strip()
    assert line == "bound", head.communicate(timeout=TIMEOUT)[1]
    return head


def _stage(key_dir: Path | None, endpoint: str, name: str) -> None:
    subprocess.run(
        [sys.executable, "-c", _SIDE, "stage", endpoint, name], env=_env(key_dir), timeout=TIMEOUT, check=True
    )


def test_only_peers_with_an_allowed_key_get_a_frame_in(key_dirs: dict[str, Path]) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    head = _head(key_dirs["head"], endpoint, listen=8.0)
    try:
        _stage(key_dirs["stage0"], endpoint, "stage0")
        _stage(key_dirs["outsider"], endpoint, "outsider")
        _stage(None, endpoint, "plaintext")
        out, err = head.communicate(timeout=TIMEOUT)
    finally:
        if head.poll() is None:
            head.kill()
            head.communicate()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["received"] == ["stage0"]
    assert report["term_returned"], "the ZAP handler kept the context from terminating"
    assert "refused a peer whose CURVE key is not allowed" in err


def test_unusable_keys_stop_the_process_at_its_first_tcp_socket(key_dirs: dict[str, Path], tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir(mode=0o700)
    for name in ("head", "stage0"):
        source = key_dirs[name] / f"{name}.key_secret"
        (mixed / source.name).write_bytes(source.read_bytes())
        (mixed / source.name).chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-c", _SIDE, "head", f"tcp://127.0.0.1:{free_port()}", "1"],
        env=_env(mixed),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode != 0 and "bound" not in done.stdout
    assert "must hold exactly one secret key" in done.stderr


def test_a_plugin_with_unusable_keys_does_not_let_its_process_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    env = {**_env(empty), "OMNI_ERRORS_VLLM_OMNI": "1", "OMNI_ERRORS_CACHE_DIR": str(tmp_path / "cache")}
    probe = "import omni_errors_vllm_omni as plugin; plugin.register(); print('started')"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 82 and "started" not in done.stdout
    assert f"{KEYS_ENV} cannot be used, so this process does not start" in done.stderr


def test_a_key_directory_is_read_as_documented(key_dirs: dict[str, Path], tmp_path: Path) -> None:
    head = load_keys(key_dirs["head"])
    stage = load_keys(key_dirs["stage0"])
    assert head.server == head.public == stage.server  # everyone authenticates the head
    assert stage.public in head.allowed and head.public in head.allowed
    assert len(head.allowed) == 2
    with pytest.raises(keys.KeyFileError, match="is not a directory"):
        load_keys(tmp_path / "absent")
    lonely = tmp_path / "lonely"
    lonely.mkdir(mode=0o700)
    (lonely / "stage0.key_secret").write_bytes((key_dirs["stage0"] / "stage0.key_secret").read_bytes())
    (lonely / "stage0.key_secret").chmod(0o600)
    with pytest.raises(keys.KeyFileError, match=r"head\.key"):
        load_keys(lonely)
    (lonely / "stage0.key_secret").chmod(0o644)
    with pytest.raises(keys.KeyFileError, match="readable by others"):
        load_keys(lonely)
