"""The reference multi-stage pipeline (thinker -> talker -> code2wav, Qwen-Omni's shape) and its
OpenAI-style server, chaos harness and fault injection. Importing this package imports nothing heavy."""
