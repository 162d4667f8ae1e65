"""Stages on other hosts: an authenticated ZMQ link with heartbeats and deadlines.

`config` (what a link is: endpoint, keys, deadlines), `keys` (CURVE key files), `messages` (the
messages on the wire), `supervisor_side` (one ROUTER socket for every remote stage) with `session`
(one stage's session), `stage_side` (a DEALER socket owned by an I/O thread, `stage_io`). Importing
this package does not import pyzmq; the two sides do. docs/remote.md describes the protocol and the policy.
"""
