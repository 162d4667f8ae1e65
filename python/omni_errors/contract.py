"""What vLLM-Omni calls: the one import path of the upstream series (`upstream/vllm-omni/`).

vLLM-Omni imports omni-errors from here and from nowhere else (`tests/vllm_omni/test_contract.py`
reads every patch of the series and fails on any other import). `__all__` is exactly the names the
series imports; a name here keeps its meaning and signature across releases, so omni-errors may
move its modules without touching vLLM-Omni. A name is added when a patch needs it, and one the
series no longer imports is removed with the release that stops using it.

Each name is resolved from its module on first use (PEP 562), so importing the contract costs
nothing: a stage process pays for the server's names (FastAPI) or the link watch's (pyzmq) only if
it calls them. `fatal_process` is the process's fatal state (`omni_errors.fatal.process`, a module:
`note`, `declare`, `exit_code`, `on_fatal`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_errors.fatal import process as fatal_process  # noqa: F401 - re-exported (`__all__`)
from omni_errors.lazy import lazy_names

if TYPE_CHECKING:  # resolved lazily by __getattr__ at run time; `as` marks the re-export
    from omni_errors._native import OmniErrorDetails as OmniErrorDetails, encode as encode
    from omni_errors.carry import (
        Carried as Carried,
        Tombstone as Tombstone,
        attach as attach,
        carried as carried,
        death_notice as death_notice,
        died_of as died_of,
        failure_frame_fields as failure_frame_fields,
        hung_notice as hung_notice,
        output_record as output_record,
        record_failure as record_failure,
        tombstone_from as tombstone_from,
    )
    from omni_errors.fatal.exitcodes import ExitCode as ExitCode, stage_exit_code as stage_exit_code
    from omni_errors.fatal.step_deadline import StepDeadline as StepDeadline, step_deadline_s as step_deadline_s
    from omni_errors.link_watch import LinkWatch as LinkWatch, RemoteReplica as RemoteReplica, head_links as head_links
    from omni_errors.render import error_info as error_info, error_response as error_response
    from omni_errors.render.jobs import stored_error_response as stored_error_response
    from omni_errors.semantics.classification import classify as classify
    from omni_errors.semantics.core_table import (
        fatal_record as fatal_record,
        replica_lost_record as replica_lost_record,
    )
    from omni_errors.semantics.exceptions import rebuild as rebuild
    from omni_errors.semantics.ids import with_ids as with_ids, with_request_id as with_request_id
    from omni_errors.semantics.legacy import from_error_message as from_error_message, to_legacy as to_legacy
    from omni_errors.semantics.reporting import report as report
    from omni_errors.server.admission import (
        AdmissionGate as AdmissionGate,
        AdmissionState as AdmissionState,
        all_or_nothing as all_or_nothing,
        health_state as health_state,
    )
    from omni_errors.server.fatal_stop import stop_on_fatal as stop_on_fatal
    from omni_errors.server.rejoin import (
        rebuilt as rebuilt,
        refuse_new_request as refuse_new_request,
        rejoin as rejoin,
        unavailable_answer as unavailable_answer,
    )
    from omni_errors.server.vllm_api import engine_error_response as engine_error_response, install_api as install_api

#: name -> the module it is read from (on first use).
_LAZY = {
    # the record and its frame
    "OmniErrorDetails": "omni_errors._native",
    "encode": "omni_errors._native",
    # what a failure means (vLLM's hierarchy), and the records the core table builds
    "classify": "omni_errors.semantics.classification",
    "rebuild": "omni_errors.semantics.exceptions",
    "fatal_record": "omni_errors.semantics.core_table",
    "replica_lost_record": "omni_errors.semantics.core_table",
    "with_ids": "omni_errors.semantics.ids",
    "with_request_id": "omni_errors.semantics.ids",
    "from_error_message": "omni_errors.semantics.legacy",
    "to_legacy": "omni_errors.semantics.legacy",
    "report": "omni_errors.semantics.reporting",
    # the record on vLLM-Omni's carriers, and the connectors' tombstone
    "Carried": "omni_errors.carry",
    "Tombstone": "omni_errors.carry",
    "attach": "omni_errors.carry",
    "carried": "omni_errors.carry",
    "death_notice": "omni_errors.carry",
    "died_of": "omni_errors.carry",
    "failure_frame_fields": "omni_errors.carry",
    "hung_notice": "omni_errors.carry",
    "output_record": "omni_errors.carry",
    "record_failure": "omni_errors.carry",
    "tombstone_from": "omni_errors.carry",
    # exit codes and a stage's step deadline
    "ExitCode": "omni_errors.fatal.exitcodes",
    "stage_exit_code": "omni_errors.fatal.exitcodes",
    "StepDeadline": "omni_errors.fatal.step_deadline",
    "step_deadline_s": "omni_errors.fatal.step_deadline",
    # a remote replica's links
    "LinkWatch": "omni_errors.link_watch",
    "RemoteReplica": "omni_errors.link_watch",
    "head_links": "omni_errors.link_watch",
    # the API server's boundary
    "error_info": "omni_errors.render",
    "error_response": "omni_errors.render",
    "stored_error_response": "omni_errors.render.jobs",
    "AdmissionGate": "omni_errors.server.admission",
    "AdmissionState": "omni_errors.server.admission",
    "all_or_nothing": "omni_errors.server.admission",
    "health_state": "omni_errors.server.admission",
    "stop_on_fatal": "omni_errors.server.fatal_stop",
    "rebuilt": "omni_errors.server.rejoin",
    "refuse_new_request": "omni_errors.server.rejoin",
    "rejoin": "omni_errors.server.rejoin",
    "unavailable_answer": "omni_errors.server.rejoin",
    "engine_error_response": "omni_errors.server.vllm_api",
    "install_api": "omni_errors.server.vllm_api",
}

__all__ = sorted(["fatal_process", *_LAZY])

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
