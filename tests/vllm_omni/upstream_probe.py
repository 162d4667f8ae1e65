"""What the upstream series' suites share (`test_upstream_*.py`): the prefixes' fingerprints, and the
probes that run vLLM-Omni's own code on the release (with the plugin's patches) and on the series'
tree (without them), reporting what each did.

A probe is `python -c` on a tree (first on the path): `_REGISTER`, then the fragments it adds, each
filling `report`, printed as the last line. The two compared probes (`COMPARED`, the session
fixtures `on_the_release` and `on_the_series` of conftest.py) take minutes each and are shared by
every suite that reads them.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omni_errors_vllm_omni.manifest import TARGETS, Target
from omni_errors_vllm_omni.verify import find_definition, fingerprint_node

RELEASE = "0.30.0"


#: The patched tree, when this run has it first on the path (`make upstream-test`).
ON_TREE = os.environ.get("OMNI_ERRORS_UPSTREAM_TREE")


RETIRED = [t for t in TARGETS if t.upstreamed]


def fingerprint_of(tree: Path, module: str, qualname: str) -> str | None:
    path = tree.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if not path.is_file():
        return None
    node = find_definition(ast.parse(path.read_bytes()), qualname)
    return None if node is None else fingerprint_node(node)


def retires_of(patch: Path) -> list[str]:
    """The manifest keys a patch's body says it retires: its `Retires` paragraph, one `- key` a line."""
    paragraph = patch.read_text().partition("Retires (omni-errors manifest):\n")[2].partition("\n\n")[0]
    return [line[2:].split(" ", 1)[0] for line in paragraph.splitlines() if line.startswith("- ")]


#: The targets whose original the series could change (vLLM's own and pyzmq's are not in the tree).
IN_TREE = [t for t in TARGETS if t.source[0].startswith("vllm_omni.")]


def retired_on(tree: Path, target: Target) -> bool:
    return bool(target.upstreamed) and fingerprint_of(tree, *target.upstream_source) in target.upstreamed.values()


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


def run_probe(tree: Path, tmp_path: Path, *fragments: str) -> dict[str, Any]:
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


#: A failed video job read back through vLLM-Omni's own routes (its router, in an app with the API
#: server's handlers, over ASGI): the metadata (200, the job's `error` the whole record), the content
#: (the stored status and envelope), and what `/openapi.json` declares for the metadata's 200.
_VIDEO_READ_BACK = r"""
import asyncio
import httpx
from fastapi import FastAPI
from omni_errors import OmniServiceUnavailableError
import vllm_omni.entrypoints.openai.api_server as api_server
from vllm_omni.entrypoints.openai.protocol.videos import VideoGenerationStatus, VideoResponse
from vllm_omni.entrypoints.openai.stores import VIDEO_STORE

app = FastAPI()
app.include_router(api_server.router)
api_server._register_omni_exception_handlers(app)
app.state.api_server_count = 1
failure = OmniServiceUnavailableError("No final video output stage found", stage_id=0)
stored = helpers._video_error_from_exception(failure)


async def read_back():
    job = VideoResponse(model="m", prompt="p", id="video_failed", status=VideoGenerationStatus.FAILED, error=stored)
    await VIDEO_STORE.upsert(job.id, job)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://probe") as client:
        metadata = await client.get("/v1/videos/video_failed")
        content = await client.get("/v1/videos/video_failed/content")
    await VIDEO_STORE.pop(job.id)
    return metadata, content


metadata, content = asyncio.run(read_back())
operation = app.openapi()["paths"]["/v1/videos/{video_id}"]["get"]
report["video_read_back"] = {
    "patched": [is_patched(api_server.retrieve_video), is_patched(api_server.download_video)],
    "metadata": [metadata.status_code, metadata.json()["status"], metadata.json()["error"]],
    "content": [content.status_code, content.headers.get("retry-after"), content.json()],
    "declared": operation["responses"]["200"]["content"]["application/json"]["schema"],
    "error_fields": sorted(app.openapi()["components"]["schemas"]["VideoError"]["properties"]),
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


MESSAGE_MODULES = ("vllm_omni.engine.orchestrator", "vllm_omni.engine.membership_controller")


HEAD_TARGETS = (
    "vllm_omni.engine.stage_engine_startup:_POLL_PERIOD_MS",
    "vllm_omni.distributed.omni_coordinator.omni_coord_client_for_stage:OmniCoordClientForStage._heartbeat_loop",
    "vllm_omni.engine.orchestrator:OrchestratorBase.__init__",
)


#: What both module probes (the release with the plugin, the series without its patches) run.
COMPARED = (
    _DIFFUSION,
    _FATAL_STOP,
    _ERROR_OUTPUT,
    _EXECUTOR,
    _MODELS,
    _VIDEO,
    _VIDEO_READ_BACK,
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
FATAL_RECORD = {
    "message": "The server had an error while processing your request.",
    "category": "server",
    "status_code": 500,
    "error_type": "InternalServerError",
    "parameter": None,
    "request_id": None,
    "stage_id": None,
    "fatal": True,
}


CLIENT_RECORD = {
    **FATAL_RECORD,
    "message": "height must be a multiple of 16",
    "category": "client",
    "status_code": 400,
    "error_type": "BadRequestError",
    "parameter": "height",
    "fatal": False,
}


SERVER_RECORD = {**FATAL_RECORD, "message": "could not read <path>", "fatal": False}


def probe_report(tree: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The probe of `tree`: the release with the plugin's patches, or the series without them."""
    report: dict[str, Any] = request.getfixturevalue("on_the_release" if tree == "release" else "on_the_series")
    return report
