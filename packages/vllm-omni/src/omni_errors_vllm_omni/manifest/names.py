"""What the targets of several processes share: the module prefixes they are named by, the labels of
the fingerprints they record (the release's, and the series' bodies between its patches), and the
upstream changes several of them wait for.
"""

from __future__ import annotations

DIFFUSION = "vllm_omni.diffusion"
ENTRYPOINTS = "vllm_omni.entrypoints"
CONNECTORS = "vllm_omni.distributed.omni_connectors"
RELEASE = "0.30.0"
# A target the series changes but does not retire: the patch still holds on the new body.
SERIES = "0.30.0+series"
# `AsyncOmni.generate` waits for admission with the gate's `admit` from patch 23 on: its body between.
SERIES_23_TO_28 = "0.30.0+series (patches 23-28)"
# An upstream change whose place a later patch changes again: its fingerprint on the prefixes before that patch.
RELEASE_BEFORE_25 = "0.30.0 (patches 19-24)"
# Patches 32 to 35 change places earlier patches' changes are read at (per-replica isolation in
# patches 28 and 30's, a remote LLM replica in 30 and 31's and the LLM stage's run in 32's, the
# LLM launcher's wait beside patch 11's, the death notice's sending in 32's): their fingerprints on
# the prefixes before.
RELEASE_BEFORE_32 = "0.30.0 (before patch 32)"
RELEASE_BEFORE_33 = "0.30.0 (before patch 33)"
RELEASE_BEFORE_34 = "0.30.0 (before patch 34)"
RELEASE_BEFORE_35 = "0.30.0 (before patch 35)"
PAYLOAD_TRANSPORT = "_OmniConnectorPayloadTransportMixin"
MEMBERSHIP_CONTROLLER = "vllm_omni.engine.membership_controller"
LIVENESS_UPSTREAM = "remote clients watch their links (ZMTP heartbeats, a socket monitor)"
# vLLM makes, binds and connects an LLM stage's engine-core sockets inside `MPClient.__init__` and the
# engine core's IO threads, with no hook for their options or a monitor: a change in vLLM (docs/upstream.md).
ENGINE_LINKS_UPSTREAM = (
    "vLLM lets the caller of its engine-core client and `EngineCoreProc` watch the sockets they make (options and "
    "a monitor before they bind or connect); vLLM-Omni then watches a remote replica's links itself"
)
ADMISSION_UPSTREAM = "a paused or sleeping engine rejects new requests with 503, as vLLM's `engine_paused` does"
ADMISSION_FIELDS = (
    "AsyncOmni._pause_cond",
    "AsyncOmni._paused",
    "AsyncOmni._hold_admission_until_resume",
    "AsyncOmni._paused_stage_ids",
    "AsyncOmni._sleeping_tags",
    "AsyncOmni._stage_sleeping_tags",
    "AsyncOmni._level2_sleeping",
    "AsyncOmni.engine",
)
REJOIN_UPSTREAM = "a stage without replicas answers 503 during a documented rejoin window"
COORDINATOR_CLIENT = "vllm_omni.distributed.omni_coordinator.omni_coord_client_for_stage"
ENGINE_CORE_PROC = "vllm_omni.engine.stage_engine_core_proc"
ENGINE_CORE_CLIENT = "vllm_omni.engine.stage_engine_core_client"
