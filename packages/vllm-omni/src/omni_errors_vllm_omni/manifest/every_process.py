"""The targets whose patched code runs in every process the plugin is loaded in (pyzmq's sockets), in
the order they apply.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest.model import Hop, Kind, Process, Target

__all__ = ["TARGETS"]

# fmt: off
TARGETS: tuple[Target, ...] = (
    Target("zmq", "Socket", "bind", "sockets:make_bind", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.socket:Socket.bind",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="with `OMNI_ERRORS_VLLM_OMNI_KEYS`, a TCP bind is a CURVE server behind a ZAP allow-list (else a "
                "warning that the deployment is plaintext); an expected stage link gets heartbeats and a monitor",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Socket", "connect", "sockets:make_connect", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.socket:Socket.connect",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="with `OMNI_ERRORS_VLLM_OMNI_KEYS`, a TCP connect is a CURVE client that authenticates the head; "
                "an expected stage link gets heartbeats and a monitor",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Context", "term", "sockets:make_term", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.context:Context.term",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="a context's ZAP handler stops before the context terminates (its socket would hold `term`)",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Context", "destroy", "sockets:make_destroy", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.context:Context.destroy",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="a context's ZAP handler stops before `destroy` closes every socket of the context",
           upstream="vLLM-Omni secures its multi-node sockets"),
)
# fmt: on
