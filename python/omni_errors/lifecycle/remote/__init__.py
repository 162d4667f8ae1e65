"""Stages on other hosts: an authenticated ZMQ link with heartbeats and deadlines.

`config` (what a link is: endpoint, keys, deadlines), `keys` (CURVE key files), `protocol` (the
messages on the wire), `server` (the supervisor's side: one ROUTER socket for every remote stage),
`client` (the stage's side: a DEALER socket owned by an I/O thread). Importing this package does
not import pyzmq; `server` and `client` do. docs/remote.md describes the protocol and the policy.
"""
