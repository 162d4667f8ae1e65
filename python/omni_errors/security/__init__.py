"""ZMQ CURVE security for every link between hosts: key files (`keys`), and the ZAP allow-list, the
loopback rule and the CURVE server and client setup (`curve`), shared by the reference pipeline's
remote link and the vLLM-Omni plugin's multi-node sockets.
"""
