"""The reference multi-stage pipeline (thinker -> talker -> code2wav, Qwen-Omni's shape) and its
OpenAI-style server, with fault injection (`faults`). Its chaos scenarios are in `omni_errors_tools.chaos`.
Importing this package imports nothing heavy."""
