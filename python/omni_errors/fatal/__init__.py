"""The fatal policy, shared by the reference lifecycle (`omni_errors_tools.lifecycle`) and the vLLM-Omni
plugin (`omni_errors_vllm_omni`): the documented exit codes (`exitcodes`), which failures end a stage
and which code wins when a process sees several (`policy`), and a dying process's fast exit
(`fast_exit`). It imports neither torch nor vLLM; both users sit above it and never import each other.
"""
