"""The targets whose patched code runs in a model runner's process (a diffusion worker, an LLM stage's
vLLM worker: connectors), in the order they apply.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest.model import Hop, Kind, Process, Target
from omni_errors_vllm_omni.manifest.names import (
    CONNECTORS as _C,
    DIFFUSION as _D,
    PAYLOAD_TRANSPORT as _TRANSPORT,
    RELEASE as _R030,
)

__all__ = ["TARGETS"]

# fmt: off
TARGETS: tuple[Target, ...] = (
    Target(f"{_D}.data", "DiffusionOutput", "from_exception", "diffusion:make_from_exception", Kind.WRAP,
           {_R030: "7d84b22e58b0f273"}, upstreamed={_R030: "f9015b1a7bdd2edc"},
           process=Process.WORKER, hop=Hop.WORKER,
           does="classifies the exception while its type is known (stage side: no raw fallbacks; OOM and "
                "fatal types along the cause chain) and attaches the record (`omni_error`) and its exit code; "
                "fills the flat `error`/`error_status_code`/`error_type` from it, sanitized",
           upstream="`from_exception` attaches the record (`omni_errors.carry.attach`: `omni_error`)"),
    Target(f"{_C}.utils.serialization", "OmniSerde", "serialize", "connectors:make_serialize", Kind.GUARD,
           {_R030: "d7caae4715bdba86"}, upstreamed={_R030: "886e6f52e44507ca"},
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a `Tombstone` (the record of a request its sender failed) is written as its bare frame, by "
                "every connector (all serialize through `OmniSerializer`)",
           upstream="`serialize` writes a `Tombstone` as its frame (`Tombstone.frame`)"),
    Target(f"{_C}.utils.serialization", "OmniSerde", "deserialize", "connectors:make_deserialize", Kind.GUARD,
           {_R030: "d5fb2b9da77d13bb"}, upstreamed={_R030: "395edae364bbb65d"},
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a frame (first byte 0x4F, then `peek` on its 16-byte header) is read back as a `Tombstone`; "
                "msgpack payloads are untouched",
           upstream="`deserialize` reads a frame back as the `Tombstone` (`tombstone_from`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "recv_stage_payload", "connectors:make_recv_stage_payload", Kind.WRAP, {_R030: "7efac7af5bc0d50c"},
           upstreamed={_R030: "ac7b443d585fea78"},
           relies_on=("_OmniConnectorPayloadTransportMixin._broadcast_tp_payload_packet",),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the sync receiver (diffusion's `_maybe_recv_stage_payload`) raises `rebuild(record)` at the read "
                "that finds a tombstone, instead of waiting `retry_seconds` and failing as \"Stage payload "
                "unavailable\"",
           upstream="`recv_stage_payload` raises the record of a tombstone it reads (`Tombstone.error`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_recv_ordinary_stage_result", "connectors:make_recv_ordinary_stage_result", Kind.WRAP,
           {_R030: "7e1ee131849338cb"}, upstreamed={_R030: "ad2b19147cf545f9"},
           upstreamed_at=f"{_C}.model_runner.omni_connector_payload_transport:{_TRANSPORT}._poll_single_request",
           relies_on=("_OmniConnectorPayloadTransportMixin._recv_full_payload_result",
                      "_OmniConnectorPayloadTransportMixin._recv_async_chunk_result"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the poller's connector read hands a tombstone to `_poll_single_request` as an exception",
           upstream="`_poll_single_request` reads the tombstone this read returns; the read is unchanged"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_poll_single_request", "connectors:make_poll_single_request", Kind.WRAP, {_R030: "c5dc10f43b629749"},
           upstreamed={_R030: "ad2b19147cf545f9"},
           relies_on=("_OmniConnectorPayloadTransportMixin._lock",
                      "_OmniConnectorPayloadTransportMixin._pending_load_reqs"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the async poller stops polling a request whose sender failed and keeps its record "
                "(`connectors.failed_requests`)",
           upstream="`_poll_single_request` stops waiting for a request whose tombstone it reads and keeps its record "
                    "(`_failed_load_reqs`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_requeue_or_drop_failed_send", "connectors:make_requeue_or_drop_failed_send", Kind.WRAP,
           {_R030: "cccbcb15b4ff0bb0"}, upstreamed={_R030: "bfb38fa8db11bdec"},
           relies_on=("_OmniConnectorPayloadTransportMixin._MAX_SEND_RETRIES",
                      "_OmniConnectorPayloadTransportMixin._omni_connector",
                      "_OmniConnectorPayloadTransportMixin._stage_id"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a send given up after its retries also puts a tombstone (server 500, the sender's `stage_id`) "
                "under the key it could not fill",
           upstream="the give-up branch puts a tombstone (`Tombstone.of`) under the key it could not fill"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "cleanup_finished_request", "connectors:make_cleanup_finished_request", Kind.WRAP,
           {_R030: "a8ef47b22658016e"}, upstreamed={_R030: "30970a46fa37aef4"},
           defined_in=f"{_C}.model_runner.omni_connector_runtime:_OmniConnectorRuntimeMixin.cleanup_finished_request",
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a finished request's kept record goes with the rest of its connector state",
           upstream="`cleanup_finished_request` drops the request's entry in `_failed_load_reqs`"),
)
# fmt: on
