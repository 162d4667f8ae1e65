"""The upstream series (`upstream/vllm-omni/0.30.0`, docs/upstream.md) against the manifest and the plugin.

Without a server: every prefix of the series applies cleanly to the 0.30.0 wheel's sources; the
targets the series retires show their recorded fingerprints after it (and not before), every other
target keeps a fingerprint the plugin accepts, and its calling contexts still hold, on every
prefix; on patch 1 alone and on the whole series, `register()` patches exactly the targets not yet
upstreamed (each probe imports every target module: minutes). On the patched tree itself
(`make upstream-test`, which puts it first on the path): vLLM-Omni's own retired code does what the
plugin did, and `omni-errors doctor` says so. `make upstream-test` then runs the *after* suites
on the same tree.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import upstream_tree
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors_vllm_omni.manifest import TARGETS, Target
from omni_errors_vllm_omni.verify import called_in_except, find_definition, fingerprint_node

RELEASE = "0.30.0"
#: The patched tree, when this run has it first on the path (`make upstream-test`).
ON_TREE = os.environ.get("OMNI_ERRORS_UPSTREAM_TREE")
RETIRED = [t for t in TARGETS if t.upstreamed]


@pytest.fixture(scope="module")
def prefixes() -> list[Path]:
    """Every prefix of the series applied (patch 1, patches 1-2, ...), each `--check`ed first: the
    trees `make upstream-tree` built, or built here when the series' bytes differ from theirs."""
    count = len(upstream_tree.patches())
    return [upstream_tree.build(k if k < count else None) for k in range(1, count + 1)]


def _fingerprint(tree: Path, module: str, qualname: str) -> str | None:
    path = tree.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file():
        return None
    node = find_definition(ast.parse(path.read_bytes()), qualname)
    return None if node is None else fingerprint_node(node)


def _retires(patch: Path) -> list[str]:
    """The manifest keys a patch's body says it retires: its `Retires` paragraph, one `- key` a line."""
    paragraph = patch.read_text().partition("Retires (omni-errors manifest):\n")[2].partition("\n\n")[0]
    return [line[2:].split(" ", 1)[0] for line in paragraph.splitlines() if line.startswith("- ")]


def test_the_series_is_numbered_and_every_prefix_applies_cleanly(prefixes: list[Path]) -> None:
    names = [p.name for p in upstream_tree.patches()]
    assert names and [n[:4] for n in names] == [f"{i:04d}" for i in range(1, len(names) + 1)]
    assert len(prefixes) == len(names)


def test_each_patch_says_what_it_retires_fixes_tests_and_notes() -> None:
    retired: list[str] = []
    for patch in upstream_tree.patches():
        text = patch.read_text()
        assert text.splitlines()[1] == "From: omni-errors <omni-errors@localhost>", f"{patch.name}: its author"
        for heading in ("RFC phase", "Retires (omni-errors manifest):", "Fixes:", "Tests:", "Release note:", "Size:"):
            assert heading in text, f"{patch.name} has no {heading!r}"
        retired += _retires(patch)
    assert sorted(retired) == sorted(t.key for t in RETIRED), "each retired entry is named by one patch"


@pytest.mark.parametrize("target", RETIRED, ids=lambda t: t.key)
def test_a_retired_target_shows_its_upstream_fingerprint_after_the_series_only(
    target: Target, prefixes: list[Path]
) -> None:
    module, qualname = target.upstream_source
    release = _fingerprint(upstream_tree.vllm_omni_tree().parent, module, qualname)
    assert release != target.upstreamed[RELEASE], "the release itself must not read as upstreamed"
    assert _fingerprint(prefixes[-1], module, qualname) == target.upstreamed[RELEASE]


@pytest.mark.parametrize("target", RETIRED, ids=lambda t: t.key)
def test_a_target_once_retired_stays_retired_on_every_later_prefix(target: Target, prefixes: list[Path]) -> None:
    """A later patch may change the place an earlier one's change is read at (patch 25 changes the
    `run_loop` where patch 19 put the death notice): the manifest must know each fingerprint it takes,
    or the plugin would patch the target again on the trees between."""
    states = [_fingerprint(tree, *target.upstream_source) in target.upstreamed.values() for tree in prefixes]
    first = states.index(True)
    assert all(states[first:]), (
        f"retired by patch {first + 1}, not on prefixes {[i + 1 for i, s in enumerate(states) if i > first and not s]}"
    )


#: The targets whose original the series could change (vLLM's own and pyzmq's are not in the tree).
IN_TREE = [t for t in TARGETS if t.source[0].startswith("vllm_omni.")]


def _retired_on(tree: Path, target: Target) -> bool:
    return bool(target.upstreamed) and _fingerprint(tree, *target.upstream_source) in target.upstreamed.values()


@pytest.mark.parametrize("target", IN_TREE, ids=lambda t: t.key)
def test_until_its_patch_a_target_keeps_a_fingerprint_the_plugin_accepts(target: Target, prefixes: list[Path]) -> None:
    """On every prefix before the patch that retires it (on all of them, for a target the series
    leaves), a target's source and its calling contexts are ones the plugin patches."""
    waiting = [tree for tree in prefixes if not _retired_on(tree, target)]
    for tree in waiting:
        assert _fingerprint(tree, *target.source) in target.fingerprints.values(), tree.name
        for context in target.in_except:
            module, _, caller = context.caller.partition(":")
            path = tree.joinpath(*module.split(".")).with_suffix(".py")
            node = find_definition(ast.parse(path.read_bytes()), caller)
            assert node is not None and called_in_except(node, context), f"{tree.name}: {context}"


#: A probe is `python -c` on a tree (first on the path): `_REGISTER`, then the fragments it adds, each
#: filling `report`, printed as the last line.
_REGISTER = r"""
import json, sys
from types import SimpleNamespace
import omni_errors_vllm_omni as plugin
from omni_errors_vllm_omni.manifest import TARGETS
from omni_errors_vllm_omni.patching import applied, is_patched
plugin.register()
import importlib
for module in sorted({t.module for t in TARGETS if t.module != "zmq"}):
    importlib.import_module(module)
import vllm_omni
report = {
    "decision": plugin.status().decision.value,
    "reason": plugin.status().reason,
    "patched": sorted(t.key for t in applied()),
    "vllm_omni": vllm_omni.__file__,
}
"""
_PRINT = "\nprint(json.dumps(report))\n"


def _probe(tree: Path, tmp_path: Path, *fragments: str) -> dict[str, Any]:
    probe = _REGISTER + "".join(fragments) + _PRINT
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMNI_ERRORS_CACHE_DIR": str(tmp_path / "cache"),
        "OMNI_ERRORS_VLLM_OMNI": "1",
        "VLLM_TARGET_DEVICE": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def on_the_series(prefixes: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One probe on the whole series' tree for both tests that read it (each probe is minutes)."""
    return _probe(prefixes[-1], tmp_path_factory.mktemp("series-probe"), *_COMPARED)


@pytest.mark.parametrize("count", [1, None], ids=["prefix-1", "whole-series"])
def test_register_patches_exactly_the_targets_not_yet_upstreamed(
    count: int | None, prefixes: list[Path], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tree = prefixes[(count or len(prefixes)) - 1]
    report = _probe(tree, tmp_path) if count is not None else request.getfixturevalue("on_the_series")
    assert report["vllm_omni"].startswith(str(tree))
    upstreamed = {t.key for t in RETIRED if _fingerprint(tree, *t.upstream_source) == t.upstreamed[RELEASE]}
    assert upstreamed  # every prefix retires something
    assert report["decision"] == "enabled"
    assert f"{len(upstreamed)} are upstreamed (nothing patched there)" in report["reason"]
    expected = {t.key for t in TARGETS if t.key not in upstreamed}  # zmq too: vLLM-Omni imports it
    assert set(report["patched"]) == expected


@pytest.mark.skipif(ON_TREE is None, reason="needs the patched tree first on the path (make upstream-test)")
def test_doctor_on_the_patched_tree_says_upstreamed_per_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "omni_errors_cli", "doctor", "--json"],
        env={**os.environ, "OMNI_ERRORS_CACHE_DIR": str(tmp_path), "OMNI_ERRORS_VLLM_OMNI": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    states = {t["target"]: t["state"] for t in report["targets"]}
    assert {k for k, s in states.items() if s == "upstreamed"} == {t.key for t in RETIRED}
    assert {s for k, s in states.items() if s != "upstreamed"} == {"matches"}
    assert report["decision"] == "enabled"


#: A diffusion stage's failed output, from the worker's `from_exception` to the engine's `postprocess_output`:
#: first in a probe, so the fatal state it reads before is the process's own (nothing fatal yet).
_DIFFUSION = r"""
import torch
from omni_errors.carry import carried
from omni_errors.fatal import process as fatal_state
from vllm.exceptions import VLLMValidationError
from vllm_omni.diffusion.data import DiffusionOutput
from vllm_omni.diffusion.diffusion_engine import DiffusionEngine

noted = [fatal_state.exit_code()]
engine = DiffusionEngine.__new__(DiffusionEngine)  # on an error, postprocess_output reads the output alone


def answered(output, request_id):
    try:
        engine.postprocess_output(SimpleNamespace(request_id=request_id), output)
    except Exception as exc:
        details = getattr(exc, "details", None)
        return [type(exc).__name__, str(exc) if details is None else details.to_dict()]
    return None


outputs = {}
for name, exc in (
    ("oom", torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")),
    ("client", VLLMValidationError("height must be a multiple of 16", parameter="height")),
    ("server", ValueError("could not read /home/alice/ckpt/model.safetensors")),
):
    output = DiffusionOutput.from_exception(exc)
    value = carried(output)
    outputs[name] = {
        "flat": [output.error, output.error_status_code, output.error_type],
        "record": None if value is None else [value.details.to_dict(), value.exit_code],
        "raised": answered(output, f"r-{name}"),
    }
noted.append(fatal_state.exit_code())
aborted = DiffusionOutput.from_exception(ValueError("cancelled"))
aborted.aborted, aborted.abort_message = True, "aborted by the client"
report["diffusion"] = {
    "patched": sorted(name for name, value in (("from_exception", vars(DiffusionOutput)["from_exception"]),
                                                ("postprocess_output", DiffusionEngine.postprocess_output))
                      if is_patched(value)),
    "noted": noted,
    "outputs": outputs,
    "aborted": answered(aborted, "r-aborted"),
    "no_record": answered(DiffusionOutput(error="worker gone"), "r-peer"),  # a peer without omni-errors
}
"""


#: After `_DIFFUSION`: the stage process's side of a fatal record. Each case starts from a clean fatal
#: state (a worker notes its code in its own process; the stage process learns it from the output),
#: and the probe leaves it clean for the fragments after it.
_FATAL_STOP = r"""
import pickle
from vllm_omni.diffusion.diffusion_engine import DiffusionExecutionMode
from vllm_omni.diffusion.stage_diffusion_proc import StageDiffusionProc


def from_a_worker(exc):  # what crosses the worker's queue
    return pickle.loads(pickle.dumps(DiffusionOutput.from_exception(exc)))


def emitted(results, mode):
    fatal_state.reset()
    calls = []
    engine = DiffusionEngine.__new__(DiffusionEngine)  # the engine's own bookkeeping, stubbed
    engine.__dict__.update(
        execution_mode=mode,
        _emit_finished_outputs=lambda finished, runner, **kw: calls.append(["emitted", sorted(finished)]),
        _remove_diffusion_kv_requests=lambda ids: None,
        _finalize_finished_request=lambda request_id, *a, **kw: runner.get_request_output(request_id).result,
        _put_output=lambda request_id, out: calls.append(["put", request_id, out.error]),
        _fail_engine=lambda exc: calls.append(["failed", type(exc).__name__, exc.details.to_dict()]),
    )
    runner = SimpleNamespace(get_request_output=lambda request_id: SimpleNamespace(result=results[request_id]))
    engine._emit_outputs(set(results), list(results), runner, worker_execution_completed=True)
    return {"calls": calls, "noted": fatal_state.exit_code()}


oom = from_a_worker(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
client = from_a_worker(VLLMValidationError("height must be a multiple of 16", parameter="height"))
fine = DiffusionOutput()
engine_report = {}
for mode in (DiffusionExecutionMode.REQUEST_BATCH, DiffusionExecutionMode.STEP_BATCH):
    engine_report[mode.value] = {
        "oom": emitted({"r1": fine, "r2": oom, "r3": client}, mode),
        "client": emitted({"r1": fine, "r3": client}, mode),
    }


def closed(code):
    fatal_state.reset()
    if code is not None:
        fatal_state.note(code)
    released = []
    proc = StageDiffusionProc.__new__(StageDiffusionProc)
    proc.__dict__.update(_closed=False, _engine=SimpleNamespace(close=lambda: released.append("engine")),
                         _executor=SimpleNamespace(shutdown=lambda wait: released.append("executor")))
    exits = []
    for _ in range(2):  # run_diffusion_proc closes once; a second close says the same
        try:
            proc.close()
            exits.append(None)
        except SystemExit as stop:
            exits.append(stop.code)
    return {"exits": exits, "released": released}


from omni_errors.fatal.exitcodes import ExitCode

report["fatal_stop"] = {
    "patched": sorted(name for name, value in (("_emit_outputs", DiffusionEngine._emit_outputs),
                                                ("close", StageDiffusionProc.close)) if is_patched(value)),
    "engine": engine_report,
    "proc": {
        "none" if code is None else str(int(code)): closed(code)
        for code in (None, ExitCode.FATAL_ENGINE, ExitCode.OOM, ExitCode.LINK_LOST)
    },
}
fatal_state.reset()
"""


#: After `_FATAL_STOP`: the inline diffusion client answering a failed request (`_dispatch_request`,
#: its engine stubbed to raise) with `OmniRequestOutput.from_error`, each case from a clean fatal state.
_ERROR_OUTPUT = r"""
import asyncio
from vllm_omni.diffusion.inline_stage_diffusion_client import InlineStageDiffusionClient
from vllm_omni.inputs.data import OmniDiffusionSamplingParams
from vllm_omni.outputs import OmniRequestOutput


class FailingEngine:
    def __init__(self, exc):
        self.exc = exc

    async def step_streaming(self, request):
        raise self.exc
        yield


def answered(exc):
    fatal_state.reset()
    client = InlineStageDiffusionClient.__new__(InlineStageDiffusionClient)
    client.__dict__.update(od_config=SimpleNamespace(streaming_output=False), _engine=FailingEngine(exc),
                           _output_queue=asyncio.Queue(), _tasks={}, stage_id=0)
    asyncio.run(client._dispatch_request("r1", "a red fox", OmniDiffusionSamplingParams()))
    output = client._output_queue.get_nowait()
    value = carried(output)
    return {
        "flat": [output.request_id, output.finished, output.error, output.error_status_code, output.error_type],
        "record": None if value is None else [value.details.to_dict(), value.exit_code],
        "noted": fatal_state.exit_code(),
    }


report["error_output"] = {
    "patched": is_patched(vars(OmniRequestOutput)["from_error"]),
    "oom": answered(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")),
    "client": answered(VLLMValidationError("height must be a multiple of 16", parameter="height")),
    "server": answered(ValueError("could not read /home/alice/ckpt/model.safetensors")),
    "outside_an_except": carried(OmniRequestOutput.from_error("r2", "Stage-0 produced no valid inputs")) is None,
}
fatal_state.reset()
"""


_EXECUTOR = r"""
import torch
from omni_errors.carry import carried
from vllm_omni.diffusion.executor.uniproc_executor import UniProcDiffusionExecutor


class OutOfMemoryWorker:  # the in-process worker's fault: what torch raises on a full device
    def execute_method(self, method, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


executor = UniProcDiffusionExecutor.__new__(UniProcDiffusionExecutor)  # _init_executor builds a real worker
executor.__dict__.update(_closed=False, _is_failed=False, _failure_callbacks=[], _warned_about_timeout=False,
                         driver_worker=OutOfMemoryWorker(), od_config=None)
request = SimpleNamespace(request_id="r1", req=SimpleNamespace(request_id="r1"), diffusion_kv_metadata=None)
out = executor.execute_request(SimpleNamespace(scheduled_new_reqs=[request], kv_prefetch_job=None))
value = carried(out.get_request_output("r1").result)
report["executor"] = {
    "collective_rpc_patched": is_patched(UniProcDiffusionExecutor.collective_rpc),
    "record": None if value is None else [value.details.status_code, value.details.fatal, int(value.exit_code)],
}
"""


_MODELS = r"""
import asyncio
from vllm.entrypoints.openai.models.protocol import BaseModelPath
from vllm.entrypoints.serve.engine.serving import BaseServing
from vllm_omni.entrypoints.openai.models.serving import _DiffusionServingModels

serving = BaseServing.__new__(BaseServing)  # vLLM's own `_check_model`, on the diffusion server's models
serving.models = _DiffusionServingModels([BaseModelPath(name="omni-tiny", model_path="/models/omni-tiny")])
answer = asyncio.run(serving._check_model(SimpleNamespace(model="not-served")))
report["models"] = {
    "getattr_patched": is_patched(_DiffusionServingModels.__getattr__),
    "answer": [answer.error.code, answer.error.type, answer.error.param],
}
"""


_MESSAGES = r"""
import vllm_omni.engine.membership_controller as membership
import vllm_omni.engine.orchestrator as orchestrator
from vllm_omni.entrypoints.omni_base import OmniBase

messages = {  # what the orchestrator and the membership controller build from flat fields
    "client": orchestrator.ErrorMessage(error="prompt refused: /home/alice/prompts/p.txt", status_code=422,
                                        error_type="Unprocessable Entity", request_id="r1", stage_id=0),
    "fatal": orchestrator.ErrorMessage(error="CUDA error at /home/alice/kernels/k.cu:12", fatal=True, stage_id=1),
    "lost": membership.ErrorMessage(error="stage replica disappeared", request_id="r2", stage_id=0),
}
raised = {}
for name, message in messages.items():
    try:
        OmniBase._raise_nonfatal_error_message(None, message)
    except Exception as exc:
        raised[name] = [type(exc).__name__, exc.details.to_dict()]
report["messages"] = {
    "details": {name: message.details.to_dict() for name, message in messages.items()},
    "raised": raised,
}
"""


_HEAD = r"""
import time
import vllm_omni.engine.stage_engine_startup as startup
from vllm_omni.distributed.omni_coordinator.omni_coord_client_for_stage import OmniCoordClientForStage
from vllm_omni.engine.orchestrator import OrchestratorBase

# A coordinator client (its sends never block: nothing listens there); its heartbeat thread runs at once.
client = OmniCoordClientForStage("tcp://127.0.0.1:9", "tcp://127.0.0.1:10", "tcp://127.0.0.1:11", 0)
deadline = time.monotonic() + 10
while client._heartbeat_interval > 1.0 and time.monotonic() < deadline:  # the plugin sets it as the loop starts
    time.sleep(0.01)
heartbeat_s = client._heartbeat_interval
client.close()
membership = SimpleNamespace(_shutdown_event=None)
orch = OrchestratorBase(None, None, None, [], membership_controller=membership)
report["head"] = {
    "poll_ms": startup._POLL_PERIOD_MS,
    "heartbeat_s": heartbeat_s,
    "shared_shutdown_event": membership._shutdown_event is orch._shutdown_event,
}
"""

#: A head's membership controller (its watcher idle): it starts, then a replica of a stage whose rejoin
#: window is open registers; a 503 error message is raised before the start (one host) and after it
#: (a multi-node head, its stage's window open). Placed before `_BOUNDARY`, which starts from a clean
#: fatal state.
_MEMBERSHIP = r"""
import asyncio
from omni_errors.fatal import process as fatal_state
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from omni_errors.server.rejoin import rejoin
from vllm_omni.engine.membership_controller import MembershipController
from vllm_omni.engine.orchestrator import ErrorMessage
from vllm_omni.entrypoints.omni_base import OmniBase

unavailable = ErrorMessage(error="Stage 5 has no live replica; retry later", status_code=503,
                           error_type="ServiceUnavailableError", request_id="r5", stage_id=5)


def raised(message):
    try:
        OmniBase._raise_nonfatal_error_message(None, message)
    except Exception as exc:
        return [type(exc).__name__, exc.details.status_code, exc.details.stage_id, getattr(exc, "retry_after", None)]
    return None


async def membership():
    controller = MembershipController.__new__(MembershipController)

    async def idle():
        return None

    controller._watch_replica_list = idle
    decided_before = fatal_state.stages_decide()
    one_host = raised(unavailable)
    await controller.start()
    rejoin().open(5, fatal_record(stage_id=5), ExitCode.LINK_LOST)
    head = raised(unavailable)
    attached = []
    pool = SimpleNamespace(add_client=lambda address, client, replica_id: attached.append(address))
    controller._pool_for_stage_id = lambda stage_id: pool
    controller._remote_replica_factory = lambda stage_id, replica_id: SimpleNamespace(request_address="tcp://10.0.0.4:5000")
    controller._shutdown_event = asyncio.Event()
    rejoin().open(4, fatal_record(stage_id=4), ExitCode.LINK_LOST)
    address = await controller._do_register(4, 0)
    return {
        "stages_decide": [decided_before, fatal_state.stages_decide()],
        "attached": attached == [address] == ["tcp://10.0.0.4:5000"],
        "window_open": rejoin().outage(4) is not None,
        "unavailable": {"one host": one_host, "multi-node head": head},
    }


report["membership"] = asyncio.run(membership())
"""

#: After `_MEMBERSHIP` (the stages decide): stage 6's rejoin window open, its pool's `pick`, a request
#: for it that finds no live replica (on a distributed pool, and on a one-host one), a new request
#: to `generate`; then, from a clean fatal state, a new request after a fatal failure.
_OUTAGE = r"""
import asyncio
from omni_errors.fatal import process as fatal_state
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from omni_errors.server.rejoin import rejoin
from vllm_omni.engine.orchestrator import OrchestratorBase
from vllm_omni.engine.stage_pool import StagePool
from vllm_omni.entrypoints.async_omni import AsyncOmni


async def dead_stage(distributed):
    orch = OrchestratorBase.__new__(OrchestratorBase)
    orch.output_async_queue = asyncio.Queue()
    cleaned = []

    async def cleanup(request_ids, **kwargs):
        cleaned.extend(request_ids)

    orch._cleanup_request_ids = cleanup
    orch._cfg_tracker = SimpleNamespace(cleanup_parent=lambda request_id: [])
    # A stage without a live replica: what the request was bound to is gone.
    pool = SimpleNamespace(
        is_distributed=distributed, get_bound_replica_id=lambda request_id: 0, live_replica_ids=lambda: []
    )
    orch.stage_pools = {6: pool}
    await orch._fail_request_dead_stage("r6", 6)
    details = orch.output_async_queue.get_nowait().details
    return [details.status_code, details.error_type, details.fatal, details.stage_id, details.request_id, cleaned]


async def first(generator):
    try:
        await generator.__anext__()
    except Exception as exc:
        return [type(exc).__name__, exc.details.status_code, exc.details.fatal, getattr(exc, "retry_after", None)]
    return None


async def outage():
    rejoin().open(6, fatal_record(stage_id=6), ExitCode.LINK_LOST)
    pool = StagePool.__new__(StagePool)
    pool.stage_id = 6
    try:
        picked = ["returned", await pool.pick("r6")]
    except Exception as exc:
        picked = [type(exc).__name__, str(exc)]
    engine = AsyncOmni.__new__(AsyncOmni)
    answers = {
        "pick": picked,
        "dead stage, head": await dead_stage(True),
        "dead stage, one host's pool": await dead_stage(False),
        "generate, outage": await first(AsyncOmni.generate(engine, "a red fox", request_id="r6")),
    }
    rejoin().close(6)
    fatal_state.reset()  # no subscriber of an earlier fragment runs; `_BOUNDARY`, next, resets too
    fatal_state.declare(fatal_record(stage_id=6), ExitCode.FATAL_ENGINE)
    answers["generate, after a fatal failure"] = await first(AsyncOmni.generate(engine, "a red fox", request_id="r7"))
    return answers


report["outage"] = asyncio.run(outage())
"""

#: After `_OUTAGE`, from a clean fatal state: `_handle_stage_error` on a CFG companion's client error and
#: on an OOM from a one-host replica (the pipeline ends); the same OOM from a remote replica is
#: `_DEAD_REPLICA`'s. `_BOUNDARY`, next, resets the fatal state again.
_STAGE_ERROR = r"""
import asyncio
from omni_errors import OmniErrorDetails
from omni_errors.carry import Carried, attach
from omni_errors.fatal import process as fatal_state
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from vllm_omni.engine.orchestrator import OrchestratorBase


def failed_output(request_id, details, code=None):
    output = SimpleNamespace(request_id=request_id, error=None, error_status_code=None, error_type=None)
    attach(output, Carried(details, code))
    return output


async def stage_error(output):
    fatal_state.reset()
    orch = OrchestratorBase.__new__(OrchestratorBase)
    orch.output_async_queue, orch.request_async_queue = asyncio.Queue(), asyncio.Queue()
    cleaned = []

    async def cleanup(request_ids, **kwargs):
        cleaned.append([list(request_ids), kwargs["abort"]])
        for request_id in request_ids:
            orch.request_states.pop(request_id, None)

    orch._cleanup_request_ids = cleanup
    orch._cfg_tracker = SimpleNamespace(
        is_companion=lambda request_id: request_id.endswith("-cfg"),
        get_parent_id=lambda request_id: request_id.removesuffix("-cfg"),
        cleanup_parent=lambda request_id: [f"{request_id}-cfg"],
    )
    replica = SimpleNamespace(_proc_manager=None)
    # The stage's one replica, 0: a fatal record from it ends the pipeline (no other replica serves on).
    pool = SimpleNamespace(get_bound_replica_id=lambda request_id: 0, clients=[replica], live_replica_ids=lambda: [0])
    orch.stage_pools = {1: pool}
    orch._membership = None
    orch.request_states = {"r1": None, "r2": None}
    await orch._handle_stage_error(1, output)
    answers = []
    while not orch.output_async_queue.empty():
        details = orch.output_async_queue.get_nowait().details
        answers.append([details.request_id, details.status_code, details.error_type, details.parameter, details.fatal])
    stops = []
    while not orch.request_async_queue.empty():
        stops.append(type(orch.request_async_queue.get_nowait()).__name__)
    code = fatal_state.exit_code()
    return {"answers": answers, "cleaned": cleaned, "stops": stops, "exit": code and int(code)}


client = OmniErrorDetails("height must be a multiple of 16", "client", 400, "BadRequestError", parameter="height")
oom = fatal_record(stage_id=1)
report["stage_error"] = {
    "client error, CFG companion": asyncio.run(stage_error(failed_output("r1-cfg", client))),
    "oom, one host": asyncio.run(stage_error(failed_output("r1", oom, ExitCode.OOM))),
}
fatal_state.reset()
"""

#: After `_STAGE_ERROR`: `_handle_dead_replica` on stage 7 for each way a replica is lost: a subprocess
#: replica that said it died of an OOM while another serves on, then as the last one; one that
#: vanished without a word; an inline replica whose executor was lost; a remote replica (multi-node
#: head), whose stage's rejoin window opens and, shortened here, passes; and the same remote replica
#: lost at once through `_handle_stage_error`, when it sends the OOM it dies of. The clients are
#: vLLM-Omni's own classes; their sockets, pool and membership are stand-ins.
_DEAD_REPLICA = r"""
import asyncio
import time
import zmq
from omni_errors.carry import Carried, attach
from omni_errors.fatal import process as fatal_state
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.link_watch import RemoteReplica
from omni_errors.semantics.core_table import fatal_record
from omni_errors.server.rejoin import rejoin
from vllm.v1.engine.exceptions import EngineDeadError
from vllm_omni.diffusion.inline_stage_diffusion_client import InlineStageDiffusionClient
from vllm_omni.diffusion.stage_diffusion_client import StageDiffusionClient
from vllm_omni.engine.orchestrator import OrchestratorBase


class NothingLeft:  # a response socket whose frames were all read
    def recv(self, flags=0):
        raise zmq.Again()


class Pool:
    def __init__(self, clients, bound):
        self.clients, self.bound = clients, bound

    def evict_replica(self, replica_id):
        self.clients[replica_id] = None

    def live_replica_ids(self):
        return [i for i, client in enumerate(self.clients) if client is not None]

    def get_bound_replica_id(self, request_id):
        return self.bound.get(request_id)


def subprocess_replica(said=None, remote=False):
    client = StageDiffusionClient.__new__(StageDiffusionClient)
    client.stage_id, client.replica_id = 7, 0
    client._response_socket, client._decoder = NothingLeft(), SimpleNamespace(death=None)
    client._proc_manager = RemoteReplica.__new__(RemoteReplica) if remote else None
    client.request_address = "tcp://10.0.0.7:5000"
    if said is not None:
        client.last_fatal = said
    return client


def inline_replica():
    client = InlineStageDiffusionClient.__new__(InlineStageDiffusionClient)
    client.stage_id, client.replica_id, client._engine_dead = 7, 0, True
    return client


async def dead_replica(client, *, others=0, remote=False, window_s=None, sends=None):
    fatal_state.reset()
    rejoin().close(7)  # an earlier case's window, passed
    orch = OrchestratorBase.__new__(OrchestratorBase)
    orch.output_async_queue, orch.request_async_queue = asyncio.Queue(), asyncio.Queue()
    orch._stage_replica_waiting, orch._prom_metrics, orch._engines_waiting_counter = {}, None, None
    cleaned = set()

    async def cleanup(request_ids, **kwargs):
        cleaned.update(request_ids)
        for request_id in request_ids:
            orch.request_states.pop(request_id, None)

    orch._cleanup_request_ids = cleanup
    orch._cfg_tracker = SimpleNamespace(cleanup_parent=lambda request_id: [], is_companion=lambda request_id: False)
    pool = Pool([client, *(object() for _ in range(others))], {"r1": 0, "r2": 1 if others else 0})
    unregistered = []

    async def handle_unregister(stage_id, address):
        unregistered.append(address)
        pool.clients[0] = None  # detached by address

    orch._membership = SimpleNamespace(handle_unregister=handle_unregister) if remote else None
    orch.stage_pools = {7: pool}
    orch.request_states = {rid: SimpleNamespace(stage_submit_ts={7: 0.0}) for rid in ("r1", "r2")}
    orch.request_states["r3"] = SimpleNamespace(stage_submit_ts={})  # not routed through stage 7
    if window_s is not None:
        rejoin().window_s = window_s
    if sends is None:
        await orch._handle_dead_replica(7, 0, EngineDeadError("replica 0 of stage 7 died"))
    else:  # r1's output: the record the replica dies of
        output = SimpleNamespace(request_id="r1", error=None, error_status_code=None, error_type=None)
        attach(output, sends)
        await orch._handle_stage_error(7, output)
    outage = rejoin().outage(7)
    deadline = time.monotonic() + 30
    while outage is not None and orch.request_async_queue.empty() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # the window passes: the pipeline ends
    answers = []
    while not orch.output_async_queue.empty():
        details = orch.output_async_queue.get_nowait().details
        answers.append([details.request_id, details.status_code, details.fatal])
    stops = []
    while not orch.request_async_queue.empty():
        stops.append(type(orch.request_async_queue.get_nowait()).__name__)
    code = fatal_state.exit_code()
    return {
        "answers": sorted(answers),
        "cleaned": sorted(cleaned),
        "stops": stops,
        "exit": code and int(code),
        "unregistered": unregistered,
        "window": None if outage is None else [outage.stage_id, int(outage.code)],
    }


oom = Carried(fatal_record(stage_id=7), ExitCode.OOM)
window_s = rejoin().window_s
report["dead_replica"] = {
    "oom, another replica serves on": asyncio.run(dead_replica(subprocess_replica(oom), others=1)),
    "oom, the last replica": asyncio.run(dead_replica(subprocess_replica(oom))),
    "vanished, the last replica": asyncio.run(dead_replica(subprocess_replica())),
    "inline, executor lost": asyncio.run(dead_replica(inline_replica())),
    "remote, the last replica": asyncio.run(dead_replica(subprocess_replica(remote=True), remote=True, window_s=0.3)),
    "remote, its fatal record": asyncio.run(
        dead_replica(subprocess_replica(oom, remote=True), remote=True, window_s=0.3, sends=oom)
    ),
}
rejoin().window_s = window_s
rejoin().close(7)
fatal_state.reset()
"""

#: After `_DEAD_REPLICA`: an LLM stage's engine core (vLLM-Omni's `StageEngineCoreProc`; its queue and
#: output thread are stand-ins) dying of an OOM and of anything else, and refusing a request while it
#: prepares it; each message it queues goes through vLLM's encoder and the stage client's decoder.
_LLM_STAGE = r"""
import queue
import threading
import torch
from omni_errors.carry import carried
from omni_errors.fatal import process as fatal_state
from vllm.exceptions import VLLMValidationError
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder
from vllm_omni.engine import stage_engine_core_client
from vllm_omni.engine.stage_engine_core_proc import StageEngineCoreProc


def engine_core():
    core = StageEngineCoreProc.__new__(StageEngineCoreProc)
    core.engine_index, core.addresses = 0, SimpleNamespace(outputs=["ipc://api"])
    core.output_queue, core.output_thread = queue.Queue(), threading.Thread(target=lambda: None)
    core.output_thread.start()
    return core


def sent(core):
    decoder = MsgpackDecoder(stage_engine_core_client.OmniEngineCoreOutputs)  # the client's
    messages = []
    while not core.output_queue.empty():
        item = core.output_queue.get_nowait()
        message = item[1] if isinstance(item, tuple) else item
        if isinstance(message, bytes):  # vLLM's dead signal
            messages.append(message.decode())
        else:
            messages.append(decoder.decode(MsgpackEncoder().encode(message)))
    return messages


def dies_of(exc):
    fatal_state.reset()
    core = engine_core()
    try:
        raise exc
    except BaseException:
        core._send_engine_dead()
    notice, dead = sent(core)
    said = carried(notice)
    return [said.details.status_code, said.details.fatal, int(said.exit_code), dead, int(fatal_state.exit_code())]


def refuses(exc):
    core = engine_core()
    try:
        raise exc
    except BaseException:
        core._handle_request_preproc_error(SimpleNamespace(request_id="r1", client_index=0))
    [answer] = sent(core)
    output = answer.outputs[0]
    details = carried(output).details
    return [output.request_id, output.finish_reason.name, output.stop_reason, details.status_code,
            details.parameter, sorted(answer.finished_requests)]


report["llm_stage"] = {
    "oom": dies_of(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")),
    "anything else": dies_of(RuntimeError("Triton compilation failed")),
    "refused": refuses(VLLMValidationError("no voice named 'alloy'", parameter="voice")),
}
fatal_state.reset()
"""

_VIDEO = r"""
import vllm_omni.entrypoints.openai.video.generation.helpers as helpers
error = helpers._video_error_from_exception(ValueError("could not read /home/alice/ckpt/model.safetensors"))
report["video"] = {
    "patched": is_patched(helpers._video_error_from_exception),
    "stored": [error.code, error.message],
}
"""

_SENDS = r"""
import asyncio
import logging
import tempfile
import time
import zmq
import vllm_omni.diffusion.stage_diffusion_client as stage_client
from omni_errors_vllm_omni.settings import LOG_NAME


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


warned = Warnings()
for name in (stage_client.__name__, LOG_NAME):  # vLLM-Omni's logger and the plugin's
    logging.getLogger(name).addHandler(warned)
sockets = tempfile.TemporaryDirectory()
Client = stage_client.StageDiffusionClient
client = Client.__new__(Client)  # _initialize_client would start a monitor on a real proc's sentinel
client.__dict__.update(stage_id=2, replica_id=0, _engine_dead=False, _shutting_down=False, _pending_rpcs=set(),
                       _rpc_results={}, _proc_manager=SimpleNamespace(proc=SimpleNamespace(is_alive=lambda: True)))
# The real transport: its request socket is bound and nothing connects to it, so no send is ever taken.
client._connect_transport(f"ipc://{sockets.name}/requests", f"ipc://{sockets.name}/responses")


async def missed(send):
    client._engine_dead = False
    began = time.monotonic()
    try:
        outcome = ["returned", await send()]
    except Exception as exc:
        outcome = [type(exc).__name__, *exc.args, exc.__suppress_context__]
    return {"outcome": outcome, "dead": client._engine_dead, "s": time.monotonic() - began}


async def sends():
    return {
        "request": await missed(lambda: client.add_request_async("r1", "a red fox", {"seed": 7})),
        "control": await missed(lambda: client.collective_rpc_async("ping")),
        "abort": await missed(lambda: client.abort_requests_async(["r1"])),
    }


report["sends"] = {
    "patched": sorted(name for name in ("_connect_transport", "add_request_async", "collective_rpc_async",
                                        "abort_requests_async") if is_patched(getattr(Client, name))),
    "sndtimeo_ms": client._request_socket.getsockopt(zmq.SNDTIMEO),
    "linger_ms": client._request_socket.getsockopt(zmq.LINGER),
    **asyncio.run(sends()),
    "warnings": [message for message in warned.messages if "abort" in message],
}
client._request_socket.close(linger=0)
client._response_socket.close(linger=0)
client._zmq_ctx.term()
sockets.cleanup()

# A remote replica's client (no process manager, TCP links): its links stand in for its process.
from omni_errors_tools.chaos.watch import free_port

remote = Client.__new__(Client)
remote.__dict__.update(stage_id=3, replica_id=1, _proc_manager=None)
remote._connect_transport(f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}")
manager = remote._proc_manager
report["sends"]["remote"] = {
    "manager": f"{type(manager).__module__}.{type(manager).__qualname__}",
    "alive": manager.proc.is_alive(),
    "heartbeat_ms": [s.getsockopt(zmq.HEARTBEAT_IVL) for s in (remote._request_socket, remote._response_socket)],
    "watched": sorted(manager.watch.sockets) == sorted([remote.request_address, remote.response_address]),
}
manager.shutdown()
remote._request_socket.close(linger=0)
remote._response_socket.close(linger=0)
remote._zmq_ctx.term()
"""
_SEND_TARGETS = ("add_request_async", "collective_rpc_async", "abort_requests_async")

#: After `_SENDS`: a real client, its request socket without a peer and set to block for ever, stopping a
#: real proc that ends each way a proc can meet the stop; each case from a clean fatal state.
_SHUTDOWN = r"""
import multiprocessing
import os
import signal
import threading
from vllm_omni.diffusion.stage_diffusion_proc import StageDiffusionProcManager

forked = multiprocessing.get_context("fork")


def serve(on_sigterm, ready):
    if on_sigterm == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif on_sigterm == "oom":  # patch 13's close: a proc that saw an OOM ends with 81 when stopped
        signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(81))
    elif on_sigterm == "gone":  # it ended out of memory before the stop
        os._exit(81)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ready.set()
    time.sleep(120)


class Manager(StageDiffusionProcManager):
    def shutdown(self, timeout=None):
        self.timeouts.append(timeout)
        super().shutdown(timeout=timeout)


def stopped(on_sigterm):
    fatal_state.reset()
    ready = forked.Event()
    proc = forked.Process(target=serve, args=(on_sigterm, ready), name="StageDiffusionProc")
    proc.start()
    if on_sigterm == "gone":
        proc.join(60)
    else:
        ready.wait(60)
    manager = Manager.__new__(Manager)
    manager.__dict__.update(proc=proc, manager_stopped=False, timeouts=[])
    client = Client.__new__(Client)
    client.__dict__.update(stage_id=2, replica_id=0, _engine_dead=False, _shutting_down=False,
                           _pending_rpcs=set(), _rpc_results={}, _proc_manager=manager)
    folder = tempfile.TemporaryDirectory()
    client._connect_transport(f"ipc://{folder.name}/requests", f"ipc://{folder.name}/responses")
    client._request_socket.setsockopt(zmq.SNDTIMEO, -1)  # a blocking send to no peer never returns
    stop = threading.Thread(target=client.shutdown, daemon=True)
    stop.start()
    stop.join(60)  # the deadline of a stop that blocks
    returned = not stop.is_alive()
    if proc.is_alive():
        proc.kill()
    proc.join(60)
    folder.cleanup()
    return {
        "returned": returned,
        "timeouts": manager.timeouts,
        "exitcode": proc.exitcode,
        "noted": fatal_state.exit_code(),
        "closed": [client._request_socket.closed, client._response_socket.closed, client._zmq_ctx.closed],
    }


report["shutdown"] = {
    "patched": is_patched(Client.shutdown),
    **{case: stopped(case) for case in ("ignore", "oom", "gone", "default")},
}
fatal_state.reset()
"""

#: After `_SHUTDOWN`: `_abort_internal_requests` on an `AsyncOmniBase` whose Orchestrator round trip
#: (`_abort`) records what it is asked, with nothing fatal and with a fatal failure declared.
_ABORT = r"""
from omni_errors.semantics.core_table import fatal_record
from vllm_omni.entrypoints.async_omni_base import ABORT_TIMEOUT_S, AsyncOmniBase


def aborted(declared):
    fatal_state.reset()
    if declared:
        fatal_state.declare(fatal_record(stage_id=1), ExitCode.FATAL_ENGINE)
    asked = []

    async def abort(request_ids, *, timeout=None):
        asked.append([request_ids, timeout])

    omni = AsyncOmniBase.__new__(AsyncOmniBase)
    omni.__dict__.update(request_states={"r1-0a1b": object()}, _abort=abort)
    returned = asyncio.run(omni._abort_internal_requests("r1-0a1b", timeout=ABORT_TIMEOUT_S))
    return {"returned": returned, "asked": asked}


report["abort"] = {
    "patched": is_patched(AsyncOmniBase._abort_internal_requests),
    "timeout": ABORT_TIMEOUT_S,
    "nothing_fatal": aborted(False),
    "fatal": aborted(True),
}
fatal_state.reset()
"""

#: After `_ABORT`: a real `run_loop` on ipc sockets whose request handler and collective RPC fail, each
#: frame read back with vLLM-Omni's own decoder; then one whose executor is dead, to its sentinel. Each
#: loop from a clean fatal state, left clean.
_FRAMES = r"""
import contextlib
import threading
from omni_errors.carry import EXIT_KEY
from vllm.v1.engine.exceptions import EngineDeadError
from vllm_omni.diffusion import stage_diffusion_proc
from vllm_omni.distributed.omni_connectors.utils.serialization import OmniMsgpackDecoder, OmniMsgpackEncoder

Proc = stage_diffusion_proc.StageDiffusionProc
failures = {
    "client": lambda: VLLMValidationError("height must be a multiple of 16", parameter="height"),
    "server": lambda: ValueError("could not read /home/alice/ckpt/model.safetensors"),
    "oom": lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    "dead": lambda: EngineDeadError(),  # after the OOM: 81 still wins
    "closed": lambda: RuntimeError("DiffusionExecutor is closed"),
}


async def failing_request(request_id, *args, **kwargs):
    raise failures[request_id]()


async def failing_rpc(method, timeout, args, kwargs):
    raise failures[method]()


def read(raw):
    if raw == Proc.DIFFUSION_PROC_DEAD:
        return "DIFFUSION_PROC_DEAD"
    frame = OmniMsgpackDecoder().decode(raw)
    value = carried(frame)
    return {
        "for": frame.get("request_id") or frame.get("rpc_id"),
        "flat": [frame["error"], frame.get("status_code"), frame.get("error_type")],
        "record": None if value is None else value.details.to_dict(),
        "exit": frame.get(EXIT_KEY),
    }


@contextlib.contextmanager
def serving(executor_dead):
    fatal_state.reset()
    proc = Proc.__new__(Proc)
    proc.__dict__.update(_od_config=SimpleNamespace(streaming_output=False), _process_request=failing_request,
                         _handle_collective_rpc=failing_rpc, _is_executor_dead=lambda: executor_dead)
    folder = tempfile.TemporaryDirectory()
    addresses = (f"ipc://{folder.name}/requests", f"ipc://{folder.name}/responses")
    context = zmq.Context()
    requests, responses = context.socket(zmq.PUSH), context.socket(zmq.PULL)
    requests.bind(addresses[0])
    responses.bind(addresses[1])
    responses.setsockopt(zmq.RCVTIMEO, 60_000)  # each frame's deadline
    encoder = OmniMsgpackEncoder()
    ended = {}

    def run():
        try:
            asyncio.run(proc.run_loop(*addresses))
        except Exception as exc:
            ended["raised"] = type(exc).__name__

    loop = threading.Thread(target=run, daemon=True)
    loop.start()
    try:
        yield lambda message: requests.send(encoder.encode(message)), lambda: read(responses.recv())
        loop.join(60)
        ended.update(stopped=not loop.is_alive(), noted=fatal_state.exit_code())
    finally:
        context.destroy(linger=0)
        folder.cleanup()
        fatal_state.reset()
    report["frames"][f"executor_dead={executor_dead}"] = ended


def request(request_id):
    return {"type": "add_request", "request_id": request_id, "prompt": "a cat", "sampling_params": {}}


report["frames"] = {"patched": sorted(name for name, patched in (
    ("OmniMsgpackEncoder", stage_diffusion_proc.OmniMsgpackEncoder is not OmniMsgpackEncoder),
    ("_signal_fatal_engine_failure", is_patched(Proc._signal_fatal_engine_failure))) if patched)}
with serving(executor_dead=False) as (send, receive):
    failed = []
    for request_id in ("client", "server", "oom"):
        send(request(request_id))
        failed.append(receive())
    for method in ("server", "dead"):
        send({"type": "collective_rpc", "rpc_id": method, "method": method})
        failed.append(receive())
    send({"type": "shutdown"})
report["frames"]["failed"] = failed
with serving(executor_dead=True) as (send, receive):
    send(request("closed"))
    report["frames"]["executor_died"] = [receive() for _ in range(3)]
"""

#: After `_FRAMES`: a real client's response socket fed the frames a proc with omni-errors sends (each
#: built as its `run_loop` builds it, then the fatal state cleared), one from a peer without it, the death
#: notice and the sentinel; then drained, as the client's poll does. Left with a clean fatal state.
_DRAIN = r"""
import queue
from omni_errors.carry import failure_frame_fields
from omni_errors_vllm_omni.client import last_words
from vllm_omni.diffusion import stage_diffusion_client
from vllm_omni.distributed.omni_connectors.utils import serialization


def sent(message, exc):
    fatal_state.reset()  # what the proc noted stays in the proc
    return {**message, **failure_frame_fields(exc, request_id=message.get("request_id"))}


frames = [
    sent({"type": "error", "request_id": "client", "error": "raw", "metrics": {"e2e_ms": 5}},
         VLLMValidationError("height must be a multiple of 16", parameter="height")),
    sent({"type": "error", "request_id": "oom", "error": "raw", "metrics": {}},
         torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")),
    sent({"type": "error", "rpc_id": "ping", "error": "raw"}, ValueError("could not read /home/alice/ckpt/w.pt")),
    {"type": "error", "request_id": "peer", "error": "worker gone", "status_code": 500,
     "error_type": "InternalServerError", "metrics": {}},  # a proc without omni-errors
    sent({"type": "error"}, EngineDeadError()),  # the death notice
]
fatal_state.reset()
drained = tempfile.TemporaryDirectory()
Client = stage_diffusion_client.StageDiffusionClient
client = Client.__new__(Client)
client.__dict__.update(stage_id=1, replica_id=0, _engine_dead=False, _pending_rpcs={"ping"}, _rpc_results={},
                       _output_queue=queue.Queue(),
                       _proc_manager=SimpleNamespace(proc=SimpleNamespace(is_alive=lambda: True)))
client._connect_transport(f"ipc://{drained.name}/requests", f"ipc://{drained.name}/responses")
proc_side = client._zmq_ctx.socket(zmq.PUSH)
proc_side.connect(client.response_address)
for message in frames:
    proc_side.send(serialization.OmniMsgpackEncoder().encode(message))
proc_side.send(Proc.DIFFUSION_PROC_DEAD)
deadline = time.monotonic() + 60
while not client._engine_dead and time.monotonic() < deadline:  # the sentinel comes last
    client._drain_responses()
    time.sleep(0.01)
outputs = []
while not client._output_queue.empty():
    output = client._output_queue.get_nowait()
    value = carried(output)
    outputs.append({
        "for": output.request_id,
        "flat": [output.error, output.error_status_code, output.error_type],
        "record": None if value is None else [value.details.to_dict(), value.exit_code],
        "metrics": output.metrics,
    })
died_of = last_words(client)
report["drain"] = {
    "patched": stage_diffusion_client.OmniMsgpackDecoder is not serialization.OmniMsgpackDecoder,
    "outputs": outputs,
    "rpc_results": client._rpc_results,
    "dead": client._engine_dead,
    "noted": fatal_state.exit_code(),
    "died_of": None if died_of is None else [died_of.details.to_dict(), died_of.exit_code],
}
proc_side.close(linger=0)
client._request_socket.close(linger=0)
client._response_socket.close(linger=0)
client._zmq_ctx.term()
drained.cleanup()
fatal_state.reset()
"""

#: A headless launcher's wait on its diffusion replicas: real (forked) replica processes that end each
#: way a replica can end, and the launcher's exit (None where it returns).
_LAUNCHER = r"""
import multiprocessing
import os
import signal
import vllm_omni.engine.stage_engine_startup as startup


def end(code):
    if code is None:
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(code)


launcher = {}
for name, code in (("clean", 0), ("fatal", 80), ("oom", 81), ("link_lost", 86), ("exception", 1), ("killed", None)):
    replica = multiprocessing.get_context("fork").Process(target=end, args=(code,), name=f"replica-{name}")
    replica.start()
    try:
        startup.wait_for_diffusion_manager_liveness([SimpleNamespace(proc=replica)])
        launcher[name] = None
    except SystemExit as stop:
        launcher[name] = stop.code
    replica.join()
report["launcher"] = {"patched": is_patched(startup.wait_for_diffusion_manager_liveness), "exits": launcher}
"""

#: Connector tombstones, with test_connector_tombstones.py's real `SharedMemoryConnector` and payload
#: transports (its helpers, imported): a tombstone put and read back; a sender that fails for real
#: and gives up; the sync receiver and the poller (full payload, async chunk) that wait for it.
#: Request ids are unique per run (shared /dev/shm), and reported as "<req>".
_TOMBSTONES = r"""
import sys
import uuid
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
sys.path.insert(0, @HELPERS@)
import test_connector_tombstones as tombstones
from omni_errors import encode
from omni_errors.carry import Tombstone
from omni_errors_vllm_omni.connectors import failed_requests

omni = tombstones.real_modules()
made, ids = [], []


def runner(stage_id, **kwargs):
    made.append(tombstones.make_runner(omni, stage_id, **kwargs))
    return made[-1]


def new_id():
    ids.append(f"tomb-{uuid.uuid4().hex[:12]}")
    return ids[-1]


def seen(details, req):
    return {**details.to_dict(), "request_id": "<req>" if details.request_id == req else details.request_id}


tomb = {"patched": sum(is_patched(value) for value in tombstones.patched_values(omni))}
try:
    connector = runner(1)._omni_connector
    req = new_id()
    key, record = f"{req}_0_0", tombstones.sender_record(req)
    put = connector.put("0", "1", key, Tombstone(record))[0]
    segment = SharedMemory(name=key)
    stored = bytes(segment.buf[: segment.size]) == encode(record)
    segment.close()
    got = connector.get("0", "1", key)
    tomb["serde"] = {
        "put": put,
        "bare_frame": stored,
        "read_back": got is not None and got[0] == Tombstone(record),
        "unlinked": not Path(f"/dev/shm/{key}").exists(),
        "payload_79": connector.put("0", "1", f"{req}_0_1", 79)[0] and connector.get("0", "1", f"{req}_0_1")[0],
    }

    sender, receiver = runner(0), runner(1)
    req = new_id()
    sender.send_full_payload_outputs(None, {req: tombstones.unsendable()})
    tombstones.wait_until(lambda: tombstones.tombstone_written(f"{req}_0_0"), "the sender puts its tombstone")
    gets = tombstones.count_gets(receiver)
    try:
        receiver.recv_stage_payload(req, "0", "1", retry_seconds=tombstones.DEADLINE_S)
        tomb["sync"] = None
    except Exception as exc:
        tomb["sync"] = {"raised": type(exc).__name__, "record": seen(exc.details, req), "gets": gets[0]}

    tomb["poller"] = {}
    for mode, async_chunk in (("full-payload", False), ("async-chunk", True)):
        sender, receiver = runner(0, async_chunk=async_chunk), runner(1, async_chunk=async_chunk)
        req = new_id()
        receiver.register_chunk_recv(SimpleNamespace(request_id=req, external_req_id=None))
        tombstones.send_failing(sender, req, async_chunk)
        tombstones.wait_until(lambda: req in failed_requests(receiver), "the poller fails the request")
        kept = seen(failed_requests(receiver)[req], req)
        waiting = req in receiver._pending_load_reqs or req in receiver._local_stage_payload_cache
        receiver.cleanup_finished_request(req)
        kept_after = req in failed_requests(receiver)
        tomb["poller"][mode] = {"record": kept, "waiting": waiting, "kept_after_cleanup": kept_after}
finally:
    for made_runner in made:
        made_runner.shutdown_omni_connectors()
    left = sorted(str(path) for req in ids for path in Path("/dev/shm").glob(f"*{req}*"))
    for path in left:
        Path(path).unlink(missing_ok=True)
tomb["left_in_shm"] = left
report["tombstones"] = tomb
""".replace("@HELPERS@", repr(str(Path(__file__).resolve().parent)))

#: Last of a probe: the plugin switched off (`unapply`), vLLM-Omni's own `_connect_transport` alone
#: (the plugin's wrap of it, for remote links, sets the same deadline on both trees).
_OWN_TRANSPORT = r"""
restored = plugin.unapply()
own = Client.__new__(Client)
own.__dict__.update(stage_id=2, replica_id=0, _proc_manager=SimpleNamespace(proc=None))
sockets = tempfile.TemporaryDirectory()
own._connect_transport(f"ipc://{sockets.name}/requests", f"ipc://{sockets.name}/responses")
report["sends"]["own_transport"] = {
    "patched": restored > 0 and is_patched(Client._connect_transport),
    "sndtimeo_ms": own._request_socket.getsockopt(zmq.SNDTIMEO),
    "linger_ms": own._request_socket.getsockopt(zmq.LINGER),
}
own._request_socket.close(linger=0)
own._response_socket.close(linger=0)
own._zmq_ctx.term()
sockets.cleanup()
"""

#: The API server's boundary over a real uvicorn server on a real socket, served by the API server's
#: own `serve_http`: a malformed body, a server failure naming a path, and a route that renders the
#: fatal failure it caught (`_create_engine_error_json_response`), which ends the server with 80.
_BOUNDARY = r"""
import asyncio
import socket

import httpx
from fastapi import FastAPI, Request
from vllm.v1.engine.exceptions import EngineDeadError
import vllm_omni.entrypoints.openai.api_server as api_server
from omni_errors.fatal import process as fatal_state

fatal_state.reset()  # the probe's earlier fragments declare fatal failures of their own
app = FastAPI()


@app.post("/v1/fail")
async def fail(body: dict) -> dict:
    raise OSError("could not read /home/alice/ckpt/model.safetensors")


@app.get("/v1/caught")
async def caught(request: Request):
    try:
        raise EngineDeadError()
    except EngineDeadError as exc:
        return api_server._create_engine_error_json_response(request, exc)


api_server._register_omni_exception_handlers(app)
app.state.engine_client = None  # no engine: vLLM's launcher starts no watchdog
listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]


def answer(response):
    error = response.json()["error"]
    return [response.status_code, error["type"], error["message"]]


async def main():
    serving = asyncio.create_task(api_server.serve_http(app, sock=listener, host="127.0.0.1", port=port))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for _ in range(600):  # the server starts listening within seconds
            try:
                bad = await client.post("/v1/fail", content=b"{not json", headers={"content-type": "application/json"})
                break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        failed = await client.post("/v1/fail", json={})
        contract = (await client.get("/openapi.json")).json()["paths"]["/v1/fail"]["post"]["responses"]
        fatal = await client.get("/v1/caught")
    shutdown = await asyncio.wait_for(serving, 60)
    try:
        await shutdown
        code = None
    except SystemExit as exit:
        code = exit.code
    return {
        "patched": [
            is_patched(api_server._register_omni_exception_handlers),
            is_patched(api_server._create_engine_error_json_response),
            is_patched(api_server.serve_http),
        ],
        "answers": [answer(bad)[:2], answer(failed), answer(fatal)],
        "declared": sorted(int(status) for status in contract if status.isdigit()),
        "exit": code,
    }


report["boundary"] = asyncio.run(main())
listener.close()
"""

#: After `_BOUNDARY`: an `AsyncOmni` built by its own `__init__` (no engine started), its admission
#: taken through vLLM-Omni's `_submit_with_admission` and its `/health` route's endpoint, while open,
#: paused, then asleep; then its `sleep` of no stage and of an unknown one, and a wake-up after a
#: level-2 sleep.
_ADMISSION = r"""
import asyncio
from omni_errors import classify
from omni_errors.server.admission import AdmissionGate
from vllm_omni.entrypoints import async_omni_base
from vllm_omni.entrypoints.async_omni import AsyncOmni
import vllm_omni.entrypoints.openai.api_server as api_server

base_init = async_omni_base.AsyncOmniBase.__init__
async_omni_base.AsyncOmniBase.__init__ = lambda self, *args, **kwargs: None  # no engine to start
try:
    omni = AsyncOmni()
finally:
    async_omni_base.AsyncOmniBase.__init__ = base_init
omni.engine = SimpleNamespace(is_alive=lambda: True)  # an Orchestrator alive, without stage pools
(health_route,) = [route.endpoint for route in api_server.router.routes if getattr(route, "path", None) == "/health"]
health_request = SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(engine_client=omni)))


async def submitted():
    async def submit():
        return "submitted"

    awaitable = submit()
    try:
        return await omni._submit_with_admission(awaitable)
    except Exception as exc:
        awaitable.close()
        details = getattr(exc, "details", None)
        return [type(exc).__name__, None if details is None else details.to_dict(), getattr(exc, "retry_after", None)]


async def health():
    response = await health_route(health_request)
    return [response.status_code, json.loads(response.body)]


async def admission():
    states = {"open": [await submitted(), await health()]}
    omni._paused = True
    states["paused"] = [await submitted(), await health()]
    omni._stage_sleeping_tags, omni._sleeping_tags = {1: {"weights"}}, {"weights"}
    states["asleep"] = [await submitted(), await health()]
    return states


async def transitions():
    omni.__dict__.update(_paused=False, _stage_sleeping_tags={}, _sleeping_tags=set(), _level2_sleeping=False)
    omni.final_output_task = object()  # the output handler "running": no Orchestrator queue to read
    omni.engine.stage_configs = [SimpleNamespace(stage_type="diffusion")] * 2
    outcomes = {"no_stage": await omni.sleep([])}
    try:
        await omni.sleep([5])
    except ValueError as exc:
        outcomes["unknown_stage"] = str(exc)
    outcomes["admission_after"] = [omni._paused, omni._level2_sleeping, await submitted()]
    omni._stage_sleeping_tags, omni._sleeping_tags, omni._level2_sleeping = {1: {"weights"}}, {"weights"}, True
    try:
        await omni.wake_up([1])
    except Exception as exc:
        outcomes["level_2_wake_up"] = classify(exc).to_dict()
    return outcomes


report["admission"] = {
    "patched": [
        is_patched(AsyncOmni.__init__),
        is_patched(health_route),
        is_patched(AsyncOmni.sleep),
        is_patched(AsyncOmni.wake_up),
    ],
    "gate": isinstance(omni._pause_cond, AdmissionGate),  # the released one: its subclass, `ReleasedGate`
    "states": asyncio.run(admission()),
    "transitions": asyncio.run(transitions()),
}
"""

_MESSAGE_MODULES = ("vllm_omni.engine.orchestrator", "vllm_omni.engine.membership_controller")
_HEAD_TARGETS = (
    "vllm_omni.engine.stage_engine_startup:_POLL_PERIOD_MS",
    "vllm_omni.distributed.omni_coordinator.omni_coord_client_for_stage:OmniCoordClientForStage._heartbeat_loop",
    "vllm_omni.engine.orchestrator:OrchestratorBase.__init__",
)

#: What both module probes (the release with the plugin, the series without its patches) run.
_COMPARED = (
    _DIFFUSION,
    _FATAL_STOP,
    _ERROR_OUTPUT,
    _EXECUTOR,
    _MODELS,
    _VIDEO,
    _MESSAGES,
    _HEAD,
    _SENDS,
    _SHUTDOWN,
    _ABORT,
    _FRAMES,
    _DRAIN,
    _LAUNCHER,
    _TOMBSTONES,
    _MEMBERSHIP,
    _OUTAGE,
    _STAGE_ERROR,
    _DEAD_REPLICA,
    _LLM_STAGE,
    _BOUNDARY,
    _ADMISSION,
    _OWN_TRANSPORT,  # last: it switches the plugin off
)


#: The records the probes' three kinds of failure get, before a request id is set: an OOM (fatal by
#: type), vLLM's validation error naming `height`, and a server error naming a path (sanitized).
_FATAL = {
    "message": "The server had an error while processing your request.",
    "category": "server",
    "status_code": 500,
    "error_type": "InternalServerError",
    "parameter": None,
    "request_id": None,
    "stage_id": None,
    "fatal": True,
}
_CLIENT = {
    **_FATAL,
    "message": "height must be a multiple of 16",
    "category": "client",
    "status_code": 400,
    "error_type": "BadRequestError",
    "parameter": "height",
    "fatal": False,
}
_SERVER = {**_FATAL, "message": "could not read <path>", "fatal": False}


@pytest.fixture(scope="module")
def on_the_release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One probe on the release with the plugin's patches, for the tests that compare it with the series."""
    return _probe(upstream_tree.vllm_omni_tree().parent, tmp_path_factory.mktemp("release-probe"), *_COMPARED)


def _report(tree: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The probe of `tree`: the release with the plugin's patches, or the series without them."""
    report: dict[str, Any] = request.getfixturevalue("on_the_release" if tree == "release" else "on_the_series")
    return report


@pytest.mark.parametrize("tree", ["release", "series"])
def test_inline_executor_answers_an_oom_with_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """Seed 003 in vLLM-Omni's own in-process executor: the release with the plugin's wrap, and the
    patched tree with nothing patched there, give the engine the same output (OOM by type: 81)."""
    report = _report(tree, request)
    assert report["executor"] == {"collective_rpc_patched": tree == "release", "record": [500, True, 81]}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_video_job_stores_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """Behaviour 5: what a failed async video job stores, for its GET. The release with the plugin's
    replacement and the patched tree's own `_video_error_from_exception` store the same."""
    report = _report(tree, request)
    assert report["video"] == {"patched": tree == "release", "stored": [500, "could not read <path>"]}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_model_the_server_does_not_serve_is_vllms_404(tree: str, request: pytest.FixtureRequest) -> None:
    """vLLM's `_check_model` on the diffusion server's models object: the release with the plugin's
    wrap, and the patched tree with nothing patched there, both answer vLLM's 404 naming the model."""
    report = _report(tree, request)
    assert report["models"] == {"getattr_patched": tree == "release", "answer": [404, "NotFoundError", "model"]}


def test_every_target_upstreamed_is_the_upstreamed_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The series' last step: nothing left to patch. `decide` judges the checks `verify` returns."""
    import omni_errors_vllm_omni as plugin
    from omni_errors_vllm_omni.doctor import EXIT_STATUS
    from omni_errors_vllm_omni.verify import Check, State

    monkeypatch.setattr(plugin, "check", lambda: [Check(t, State.UPSTREAMED, None, "in") for t in TARGETS])
    monkeypatch.setenv(plugin.ENV_VAR, "1")
    decided = plugin.decide()
    assert decided.decision is plugin.Decision.UPSTREAMED
    assert decided.reason == f"all {len(TARGETS)} targets are upstreamed: nothing to patch"
    assert EXIT_STATUS[decided.decision] == 0


@pytest.mark.parametrize("tree", ["release", "series"])
def test_an_error_message_carries_the_record_the_plugin_gave_it(tree: str, request: pytest.FixtureRequest) -> None:
    """The orchestrator's and the membership controller's `ErrorMessage` built from flat fields: the
    release with the plugin's record-carrying subclass and the patched tree's own `details` give the
    same records, and `_raise_nonfatal_error_message` raises the same errors from them."""
    report = _report(tree, request)
    messages = report["messages"]
    assert {f"{module}:ErrorMessage" for module in _MESSAGE_MODULES} & set(report["patched"]) == (
        {f"{module}:ErrorMessage" for module in _MESSAGE_MODULES} if tree == "release" else set()
    )
    client, fatal, lost = (messages["details"][name] for name in ("client", "fatal", "lost"))
    assert client == {
        "message": "prompt refused: <path>",
        "category": "client",
        "status_code": 422,
        "error_type": "UnprocessableEntityError",
        "parameter": None,
        "request_id": "r1",
        "stage_id": 0,
        "fatal": False,
    }
    assert fatal["fatal"] and fatal["stage_id"] == 1 and "/home/" not in fatal["message"]
    assert (lost["status_code"], lost["request_id"], lost["stage_id"]) == (500, "r2", 0)
    assert messages["raised"]["client"] == ["OmniClientError", client]
    assert messages["raised"]["lost"] == ["OmniServerError", lost]
    if tree == "series":  # the same, byte for byte, as with the plugin
        assert messages == request.getfixturevalue("on_the_release")["messages"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_heads_waits_are_the_plugins(tree: str, request: pytest.FixtureRequest) -> None:
    """A multi-node head's registration poll, a stage's heartbeat and the membership watcher's stop:
    the release with the plugin's patches and the patched tree with nothing patched there agree."""
    report = _report(tree, request)
    assert set(_HEAD_TARGETS) & set(report["patched"]) == (set(_HEAD_TARGETS) if tree == "release" else set())
    assert report["head"] == {
        "poll_ms": 100,
        "heartbeat_s": 1.0,
        "shared_shutdown_event": True,
    }


_OUTAGE_TARGETS = (
    "vllm_omni.engine.stage_pool:StagePool.pick",
    "vllm_omni.engine.orchestrator:OrchestratorBase._fail_request_dead_stage",
    "vllm_omni.entrypoints.async_omni:AsyncOmni.generate",
)


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_stage_in_its_rejoin_window_refuses_at_once_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """On a multi-node head with a stage's rejoin window open: its pool's `pick` refuses at once, a
    request that finds no live replica gets the 503 record (a one-host pool's still the fatal one), and
    `generate` refuses a new request with 503 and `Retry-After`; after a fatal failure, `generate`
    answers the fatal record at once. The plugin's patches on the release, vLLM-Omni's own calls on the
    series (patches 28 and 29): the same answers."""
    report = _report(tree, request)
    assert set(_OUTAGE_TARGETS) & set(report["patched"]) == (set(_OUTAGE_TARGETS) if tree == "release" else set())
    outage = report["outage"]
    assert outage["pick"] == ["StageUnavailableError", "stage 6 has no live replica (rejoin window)"]
    assert outage["dead stage, head"] == [503, "ServiceUnavailableError", False, 6, "r6", ["r6"]]
    one_host = outage["dead stage, one host's pool"]
    assert one_host[0] >= 500 and one_host[2:] == [True, 6, "r6", ["r6"]]  # fatal, as on one host before
    assert outage["generate, outage"][1:] == [503, False, RETRY_AFTER_S]
    assert outage["generate, after a fatal failure"][1:] == [500, True, None]
    if tree == "series":
        assert outage == request.getfixturevalue("on_the_release")["outage"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_stage_error_answers_its_record_and_a_fatal_one_ends_the_pipeline_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """`_handle_stage_error`: a CFG companion's client error answers its parent with the stage's record
    (400, `parameter`), and the pipeline serves on; an OOM on one host answers every request in flight
    with the fatal record, stops the orchestrator through its own shutdown message and makes 81 the
    exit code (the same OOM from a remote replica: `_handle_dead_replica`'s test). The plugin's
    replacement on the release, vLLM-Omni's own on the series (patches 30, 32, 33): the same answers."""
    report = _report(tree, request)
    key = "vllm_omni.engine.orchestrator:OrchestratorBase._handle_stage_error"
    assert (key in report["patched"]) is (tree == "release")
    stage_error = report["stage_error"]
    assert stage_error["client error, CFG companion"] == {
        "answers": [["r1", 400, "BadRequestError", "height", False]],
        "cleaned": [[["r1", "r1-cfg"], True]],
        "stops": [],
        "exit": None,
    }
    fatal = [500, "InternalServerError", None, True]
    assert stage_error["oom, one host"] == {
        "answers": [["r1", *fatal], ["r2", *fatal]],  # its own answer, then every other one in flight
        "cleaned": [[["r1", "r1-cfg"], True], [["r2"], False]],
        "stops": ["ShutdownRequestMessage"],
        "exit": 81,
    }
    if tree == "series":
        assert stage_error == request.getfixturevalue("on_the_release")["stage_error"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_dead_replica_ends_the_pipeline_or_waits_for_its_stages_window_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """`_handle_dead_replica`: a replica that dies while another serves fails only its own requests, as a
    lost replica's (503, not fatal: a fatal answer would end the server); the last one ends the
    pipeline (every request in flight answered, the orchestrator's own shutdown) with what it said it
    died of (81), 85 when it vanished without a word, 80 for an inline stage whose
    executor was lost; a remote replica is detached through the membership controller, its requests
    answered as lost (not fatal), and its stage's window opened: the pipeline ends only when the window
    passes, with 86; a remote replica that sends the OOM it dies of is lost at once, its stage's window
    keeping 81. The plugin's wrap on the release, vLLM-Omni's own on the series (patches 31 to 33)."""
    report = _report(tree, request)
    key = "vllm_omni.engine.orchestrator:OrchestratorBase._handle_dead_replica"
    assert (key in report["patched"]) is (tree == "release")
    dead = report["dead_replica"]
    local = {"unregistered": [], "window": None}
    assert dead["oom, another replica serves on"] == {
        **local,
        "answers": [["r1", 503, False]],  # r2 is bound to the live replica
        "cleaned": ["r1"],
        "stops": [],
        "exit": None,
    }
    ended = {  # the stage's requests answered as fatal, then r3, in flight elsewhere, with the record
        **local,
        "answers": [["r1", 500, True], ["r2", 500, True], ["r3", 500, True]],
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
    }
    assert dead["oom, the last replica"] == {**ended, "exit": 81}
    assert dead["vanished, the last replica"] == {**ended, "exit": 85}
    assert dead["inline, executor lost"] == {**ended, "exit": 80}
    assert dead["remote, the last replica"] == {
        "answers": [["r1", 500, False], ["r2", 500, False], ["r3", 500, True]],  # lost, then the window passed
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
        "exit": 86,
        "unregistered": ["tcp://10.0.0.7:5000"],
        "window": [7, 86],
    }
    assert dead["remote, its fatal record"] == {  # r1's own answer is its record; r2 was on the replica
        "answers": [["r1", 500, True], ["r2", 500, False], ["r3", 500, True]],
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
        "exit": 81,
        "unregistered": ["tcp://10.0.0.7:5000"],
        "window": [7, 81],
    }
    if tree == "series":
        assert dead == request.getfixturevalue("on_the_release")["dead_replica"]


_LLM_TARGETS = (
    "StageEngineCoreProc._send_engine_dead",
    "StageEngineCoreProc._handle_request_preproc_error",
    "StageEngineCoreProc.shutdown",
    "OmniEngineCoreOutputs",
    "StageEngineCoreClientBase.__init__",
)


@pytest.mark.parametrize("tree", ["release", "series"])
def test_an_llm_stage_says_what_it_died_of_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """An LLM stage's engine core that dies sends the record it dies of and its exit code (81 for an
    OOM by type, 80 for anything else) before vLLM's dead signal, and notes the code in its process;
    a request it refuses while preparing it is answered with its record (400, `parameter`) and its
    text as `stop_reason`. The plugin's wraps on the release, vLLM-Omni's own on the series (patch 32)."""
    report = _report(tree, request)
    patched = {key.partition(":")[2] for key in report["patched"]} & set(_LLM_TARGETS)
    assert patched == (set(_LLM_TARGETS) if tree == "release" else set())
    llm = report["llm_stage"]
    assert llm["oom"] == [500, True, 81, "ENGINE_CORE_DEAD", 81]
    assert llm["anything else"] == [500, True, 80, "ENGINE_CORE_DEAD", 80]
    assert llm["refused"] == ["r1", "ERROR", "no voice named 'alloy'", 400, "voice", ["r1"]]
    if tree == "series":
        assert llm == request.getfixturevalue("on_the_release")["llm_stage"]


_MEMBERSHIP_TARGETS = ("MembershipController.start", "MembershipController._do_register")


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_membership_controller_drives_the_cores_head_policy_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """A head's membership controller that starts makes the stages decide when the head ends (a fatal
    answer no longer ends it), and a replica that registers closes its stage's rejoin window; an error
    message's 503 then gets its stage's `Retry-After`: the plugin's patches on the release, vLLM-Omni's
    own calls on the series (patches 26 and 27), the same core state."""
    report = _report(tree, request)
    patched = {key.partition(":")[2] for key in report["patched"]} & set(_MEMBERSHIP_TARGETS)
    assert patched == (set(_MEMBERSHIP_TARGETS) if tree == "release" else set())
    membership = dict(report["membership"])
    unavailable = membership.pop("unavailable")
    assert membership == {"stages_decide": [False, True], "attached": True, "window_open": False}
    # `_raise_nonfatal_error_message`: a 503 gets its stage's `Retry-After` only on a head waiting for a replica.
    assert [answer[1:] for answer in unavailable.values()] == [[503, 5, None], [503, 5, RETRY_AFTER_S]]
    if tree == "series":
        assert unavailable == request.getfixturevalue("on_the_release")["membership"]["unavailable"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_send_the_stage_does_not_take_is_the_plugins(tree: str, request: pytest.FixtureRequest) -> None:
    """Seed 001's hang in a send, on a real client whose request socket has no peer (nothing ever takes
    a message): the release with the plugin's wraps and the patched tree with nothing patched there set
    the same deadline, raise the same `EngineDeadError` once it passes, mark the stage dead, and drop
    an abort with a warning; a remote replica's client (no process manager, TCP links) gets the core's
    `RemoteReplica`, alive, its two links watched with heartbeats (the plugin's `_connect_transport` wrap
    on the release, vLLM-Omni's own on the series: patch 25). With the plugin switched off, vLLM-Omni's
    own sets the deadline on the series only (the release's sends block: seed 001)."""
    report = _report(tree, request)
    sends = dict(report["sends"])
    assert sends.pop("patched") == (sorted(["_connect_transport", *_SEND_TARGETS]) if tree == "release" else [])
    assert sends.pop("remote") == {
        "manager": "omni_errors.link_watch.RemoteReplica",
        "alive": True,
        "heartbeat_ms": [400, 400],
        "watched": True,
    }
    waited = {name: sends[name].pop("s") for name in ("request", "control", "abort")}
    assert all(0.9 < s < 10 for s in waited.values()), waited  # the 1 s deadline: neither at once nor a hang
    warnings = sends.pop("warnings")
    assert len(warnings) == 1 and "is gone; abort of 1 request(s) dropped" in warnings[0], warnings
    own = sends.pop("own_transport")
    assert own == {
        "patched": False,
        "sndtimeo_ms": 1000 if tree == "series" else -1,
        "linger_ms": 0 if tree == "series" else -1,
    }
    dead = "EngineCore encountered an issue. See stack trace (above) for the root cause."
    assert sends == {
        "sndtimeo_ms": 1000,
        "linger_ms": 0,
        "request": {
            "outcome": ["EngineDeadError", dead, "Stage-2 did not take a request within 1000 ms", True],
            "dead": True,
        },
        "control": {
            "outcome": ["EngineDeadError", dead, "Stage-2 did not take a control message within 1000 ms", True],
            "dead": True,
        },
        "abort": {"outcome": ["returned", None], "dead": True},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_stage_clients_shutdown_does_not_block_and_carries_an_oom_exit(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 001's stop of a hung stage and seed 003's exit code at the server, on a real client whose
    request socket takes nothing (a blocking send would never return) and a real proc: the release with
    the plugin's replacement and the patched tree with nothing patched there stop it the same way. A
    proc that ignores SIGTERM is killed after 0.5 s (was 10 s); one that ends 81, before the stop or on
    it, notes 81 in the server's fatal state; one that ends on the signal notes nothing."""
    report = _report(tree, request)
    shutdown = dict(report["shutdown"])
    assert shutdown.pop("patched") is (tree == "release")
    stopped = {"returned": True, "closed": [True, True, True]}
    assert shutdown == {
        "ignore": {**stopped, "timeouts": [0.5], "exitcode": -signal.SIGKILL, "noted": None},
        "oom": {**stopped, "timeouts": [0.5], "exitcode": 81, "noted": 81},
        "gone": {**stopped, "timeouts": [], "exitcode": 81, "noted": 81},
        "default": {**stopped, "timeouts": [0.5], "exitcode": -signal.SIGTERM, "noted": None},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_after_a_fatal_failure_a_request_is_not_aborted_through_the_pipeline(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """A failed request's abort: the release with the plugin's wrap and the patched tree with nothing
    patched there send it to the Orchestrator while nothing is fatal, and return at once, sending
    nothing, once the API process's fatal state holds a fatal failure (the ended pipeline would
    leave the answer waiting the whole abort timeout)."""
    report = _report(tree, request)
    abort = dict(report["abort"])
    assert abort.pop("patched") is (tree == "release")
    timeout = abort.pop("timeout")
    assert abort == {
        "nothing_fatal": {"returned": None, "asked": [[["r1-0a1b"], timeout]]},
        "fatal": {"returned": None, "asked": []},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_procs_error_frames_carry_the_record_they_answer(tree: str, request: pytest.FixtureRequest) -> None:
    """The stage-to-client hop of a subprocess stage: a real `run_loop` whose request handler and
    collective RPC fail, then one whose executor is dead, their frames read back with vLLM-Omni's own
    decoder. The release with the plugin's encoder and death notice and the patched tree with nothing
    patched there send the same frames: the record (a request's with its id), the sanitized flat fields
    from it, and on a fatal one the exit code that wins in the proc (81 after an OOM, for a dead engine
    too); a dead executor's proc sends the record it dies of (exit 80) before its sentinel."""
    report = _report(tree, request)
    frames = dict(report["frames"])
    patched = ["OmniMsgpackEncoder", "_signal_fatal_engine_failure"]
    assert frames.pop("patched") == (patched if tree == "release" else [])
    closed = {**_SERVER, "message": "DiffusionExecutor is closed"}

    def frame(
        details: dict[str, Any], answers: str | None, exit_code: int | None, *, of_request: bool
    ) -> dict[str, Any]:
        flat = [details["message"], details["status_code"], details["error_type"]]
        record = {**details, "request_id": answers if of_request else None}
        return {"for": answers, "flat": flat, "record": record, "exit": exit_code}

    assert frames == {
        "executor_dead=False": {"stopped": True, "noted": 81},
        "failed": [
            frame(_CLIENT, "client", None, of_request=True),
            frame(_SERVER, "server", None, of_request=True),
            frame(_FATAL, "oom", 81, of_request=True),
            frame(_SERVER, "server", None, of_request=False),
            frame(_FATAL, "dead", 81, of_request=False),
        ],
        "executor_dead=True": {"stopped": True, "noted": 80, "raised": "RuntimeError"},
        "executor_died": [
            frame(closed, "closed", None, of_request=True),
            frame(_FATAL, None, 80, of_request=False),
            "DIFFUSION_PROC_DEAD",
        ],
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_stage_client_reads_the_record_of_each_error_frame(tree: str, request: pytest.FixtureRequest) -> None:
    """The client's side of the stage-to-client hop: a real client's response socket fed the frames a
    proc with omni-errors sends, one from a peer without it, the death notice and the sentinel. The
    release with the plugin's decoder and the patched tree with nothing patched there drain them alike:
    each request's error output with its record (the flat fields from it), the peer's from its flat
    fields, the RPC's failure with its sanitized reason, the OOM's 81 noted in the server's fatal
    state, the stage dead, and the death notice's record (80) as what the replica died of."""
    report = _report(tree, request)
    drain = dict(report["drain"])
    assert drain.pop("patched") is (tree == "release")
    assert drain == {
        "outputs": [
            {
                "for": "client",
                "flat": [_CLIENT["message"], 400, "BadRequestError"],
                "record": [{**_CLIENT, "request_id": "client"}, None],
                "metrics": {"e2e_ms": 5},
            },
            {
                "for": "oom",
                "flat": [_FATAL["message"], 500, "InternalServerError"],
                "record": [{**_FATAL, "request_id": "oom"}, 81],
                "metrics": {},
            },
            {"for": "peer", "flat": ["worker gone", 500, "InternalServerError"], "record": None, "metrics": {}},
        ],
        "rpc_results": {"ping": {"error": True, "reason": "could not read <path>"}},
        "dead": True,
        "noted": 81,
        "died_of": [_FATAL, 80],
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_headless_launcher_ends_with_its_replicas_code(tree: str, request: pytest.FixtureRequest) -> None:
    """A headless launcher whose diffusion replica ended: the release with the plugin's replacement and
    the patched tree with nothing patched there reap the replica before reading its code and exit with
    its documented code (85 for a signal or an unknown code); a clean end lets the launcher return."""
    report = _report(tree, request)
    assert report["launcher"] == {
        "patched": tree == "release",
        "exits": {"clean": None, "fatal": 80, "oom": 81, "link_lost": 86, "exception": 85, "killed": 85},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_diffusion_output_carries_its_record_and_the_engine_raises_it(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 003 from the worker to the engine: `DiffusionOutput.from_exception` and the engine's
    `postprocess_output`, the release with the plugin's wraps and the patched tree with nothing patched
    there: the same record on the output (an OOM fatal by type, exit 81, noted in the fatal state),
    the same sanitized flat fields, the same exception raised from it; an aborted output and one
    without a record (a peer without omni-errors) answered as vLLM-Omni answers them."""
    report = _report(tree, request)
    diffusion = dict(report["diffusion"])
    assert diffusion.pop("patched") == (["from_exception", "postprocess_output"] if tree == "release" else [])
    oom, client, server = _FATAL, _CLIENT, _SERVER
    assert diffusion == {
        "noted": [None, 81],
        "outputs": {
            "oom": {
                "flat": [oom["message"], 500, "InternalServerError"],
                "record": [oom, 81],
                "raised": ["OmniEngineDeadError", {**oom, "request_id": "r-oom"}],
            },
            "client": {
                "flat": [client["message"], 400, "BadRequestError"],
                "record": [client, None],
                "raised": ["OmniClientError", {**client, "request_id": "r-client"}],
            },
            "server": {
                "flat": [server["message"], 500, "InternalServerError"],
                "record": [server, None],
                "raised": ["OmniServerError", {**server, "request_id": "r-server"}],
            },
        },
        "aborted": ["DiffusionRequestAbortedError", "aborted by the client"],
        "no_record": ["RuntimeError", "worker gone"],
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_fatal_record_stops_the_diffusion_engine_and_the_proc_exits_with_its_code(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 003 in the stage process: a worker's OOM record delivered by `_emit_outputs` (both execution
    modes) fails the engine once, with the rebuilt record, and notes 81 in the stage process's fatal
    state; a client error fails nothing. `StageDiffusionProc.close` releases the engine and executor,
    then ends the proc with the fatal state's code (80, 81, 86), or returns when nothing fatal
    happened. The release with the plugin's wraps and the patched tree with nothing patched there agree."""
    report = _report(tree, request)
    stop = dict(report["fatal_stop"])
    assert stop.pop("patched") == (["_emit_outputs", "close"] if tree == "release" else [])
    fatal = _FATAL
    failed = ["failed", "OmniEngineDeadError", fatal]
    put = [["put", "r1", None], ["put", "r2", fatal["message"]], ["put", "r3", "height must be a multiple of 16"]]
    released = ["engine", "executor"]
    assert stop == {
        "engine": {
            "request_batch": {
                "oom": {"calls": [["emitted", ["r1", "r2", "r3"]], failed], "noted": 81},
                "client": {"calls": [["emitted", ["r1", "r3"]]], "noted": None},
            },
            "step_batch": {
                "oom": {"calls": [*put, failed], "noted": 81},
                "client": {"calls": [put[0], put[2]], "noted": None},
            },
        },
        "proc": {
            "none": {"exits": [None, None], "released": released},
            "80": {"exits": [80, 80], "released": released},
            "81": {"exits": [81, 81], "released": released},
            "86": {"exits": [86, 86], "released": released},
        },
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_inline_clients_error_output_carries_the_record_it_answers(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """The inline diffusion client answering a failed request: `OmniRequestOutput.from_error`, built inside
    the `except` that caught the failure, carries that failure's record (the release with the plugin's
    wrap reads the exception being handled; the patched tree's own `from_error` is handed it), its flat
    fields from the record, an OOM's 81 noted in the fatal state; built outside an `except`, no record."""
    report = _report(tree, request)
    answers = dict(report["error_output"])
    assert answers.pop("patched") is (tree == "release")
    record, client, server = ({**details, "request_id": "r1"} for details in (_FATAL, _CLIENT, _SERVER))
    assert answers == {
        "oom": {
            "flat": ["r1", True, record["message"], 500, "InternalServerError"],
            "record": [record, 81],
            "noted": 81,
        },
        "client": {
            "flat": ["r1", True, client["message"], 400, "BadRequestError"],
            "record": [client, None],
            "noted": None,
        },
        "server": {
            "flat": ["r1", True, server["message"], 500, "InternalServerError"],
            "record": [server, None],
            "noted": None,
        },
        "outside_an_except": True,
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_connector_reads_a_tombstone_back_as_the_tombstone(tree: str, request: pytest.FixtureRequest) -> None:
    """A real `SharedMemoryConnector`: a `Tombstone` put is stored as its bare frame and read back as the
    same `Tombstone` (the segment unlinked by the read), and a payload starting with the frame's first
    byte (79) is read back unchanged, on the release with the plugin's wraps and on the patched tree
    with nothing patched there."""
    report = _report(tree, request)
    tomb = report["tombstones"]
    assert tomb["serde"] == {"put": True, "bare_frame": True, "read_back": True, "unlinked": True, "payload_79": 79}
    assert tomb["left_in_shm"] == []


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_sender_fails_its_receivers_with_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """A sender whose `put` fails for real and whose save thread gives up puts a tombstone under its
    receiver's key; the sync receiver raises its record at its first read, and the poller (full payload,
    async chunk) stops waiting for the request and keeps its record until `cleanup_finished_request`.
    The release with the plugin's wraps and the patched tree with nothing patched there give the same."""
    report = _report(tree, request)
    tomb = report["tombstones"]
    assert tomb["patched"] == (7 if tree == "release" else 0)  # the seven connector entries
    record = tomb["sync"]["record"]
    assert tomb["sync"] == {"raised": "OmniServerError", "record": record, "gets": 1}
    assert (record["category"], record["status_code"], record["stage_id"], record["request_id"]) == (
        "server",
        500,
        0,
        "<req>",
    )
    assert not record["fatal"] and "/dev/shm" not in record["message"]
    for mode in ("full-payload", "async-chunk"):
        assert tomb["poller"][mode] == {"record": record, "waiting": False, "kept_after_cleanup": False}, mode
    if tree == "series":  # the same, record for record, as with the plugin
        assert tomb == {**request.getfixturevalue("on_the_release")["tombstones"], "patched": 0}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_api_boundary_is_the_cores_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """Behaviour 1 and seed 003 at the API server: the release with the plugin's three wraps, and the
    patched tree with nothing patched there, answer a malformed body 400, a server failure with its
    sanitized record, a caught fatal failure with the fatal record; declare the error contract; and
    the fatal record stops the server, whose `serve_http` then exits 80."""
    report = _report(tree, request)
    assert report["boundary"] == {
        "patched": [tree == "release"] * 3,
        "answers": [
            [400, "BadRequestError"],
            [500, "InternalServerError", _SERVER["message"]],
            [500, "InternalServerError", _FATAL["message"]],
        ],
        "declared": [200, 400, 413, 422, 500, 501, 503],
        "exit": 80,
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_admission_is_the_cores_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """Patches 23 and 24: the release with the plugin's wraps and the patched tree with nothing
    patched there build the same gate; a request to a paused, then a sleeping engine gets the same
    503 with `Retry-After`, and `/health` the same 200 body naming the state; a sleep of no stage
    and of an unknown one leave admission open (vLLM-Omni's own left it closed for ever), and a
    wake-up after a level-2 sleep is the same 501 naming the stage."""
    report = _report(tree, request)
    admission = dict(report["admission"])
    assert admission.pop("patched") == [tree == "release"] * 4
    assert admission.pop("gate") is True
    refused = {
        **_FATAL,
        "category": "server",
        "status_code": 503,
        "error_type": "ServiceUnavailableError",
        "fatal": False,
    }
    paused = "Generation is paused: it resumes after resume_generation (POST /resume)"
    asleep = 'Stage 1 is asleep: wake it with POST /v1/omni/wakeup {"stage_ids": [1]}'
    assert admission.pop("states") == {
        "open": ["submitted", [200, {"status": "healthy"}]],
        "paused": [
            ["OmniServerError", {**refused, "message": paused, "stage_id": 0}, RETRY_AFTER_S],
            [200, {"status": "paused", "is_sleeping": False, "is_paused": True, "stage_id": 0, "message": paused}],
        ],
        "asleep": [
            ["OmniServerError", {**refused, "message": asleep, "stage_id": 1}, RETRY_AFTER_S],
            [200, {"status": "sleeping", "is_sleeping": True, "is_paused": True, "stage_id": 1, "message": asleep}],
        ],
    }
    assert admission.pop("transitions") == {
        "no_stage": [],
        "unknown_stage": "Invalid stage_ids [5]; valid range is 0..1",
        "admission_after": [False, False, "submitted"],
        "level_2_wake_up": {
            **refused,
            "status_code": 501,
            "error_type": "NotImplementedError",
            "stage_id": 1,
            "message": "Stage 1 slept at level 2 (its weights were discarded) and vLLM-Omni cannot wake it: "
            "restart the server",
        },
    }
