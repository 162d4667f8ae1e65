"""The series against the plugin, the connectors (`omni_errors_vllm_omni.connectors`): a tombstone
read back, and a failed sender's receivers; the release with the plugin and the series' tree
without it give the same (`upstream_probe`).
"""

from __future__ import annotations

import pytest
from upstream_probe import probe_report


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_connector_reads_a_tombstone_back_as_the_tombstone(tree: str, request: pytest.FixtureRequest) -> None:
    """A real `SharedMemoryConnector`: a `Tombstone` put is stored as its bare frame and read back as the
    same `Tombstone` (the segment unlinked by the read), and a payload starting with the frame's first
    byte (79) is read back unchanged, on the release with the plugin's wraps and on the patched tree
    with nothing patched there."""
    report = probe_report(tree, request)
    tomb = report["tombstones"]
    assert tomb["serde"] == {"put": True, "bare_frame": True, "read_back": True, "unlinked": True, "payload_79": 79}
    assert tomb["left_in_shm"] == []


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_sender_fails_its_receivers_with_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """A sender whose `put` fails for real and whose save thread gives up puts a tombstone under its
    receiver's key; the sync receiver raises its record at its first read, and the poller (full payload,
    async chunk) stops waiting for the request and keeps its record until `cleanup_finished_request`.
    The release with the plugin's wraps and the patched tree with nothing patched there give the same."""
    report = probe_report(tree, request)
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
