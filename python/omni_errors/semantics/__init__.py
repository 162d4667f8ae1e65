"""What a failure means: the Omni exceptions on vLLM's hierarchy, the classification table
(exception -> record, record -> exception), the one report path, the error counter, the readers of
vLLM-Omni 0.30's flat fields and the generated catalogue.

Importing this package imports none of its modules: `exceptions` and `classification` import vLLM,
while `rules`, `core_table`, `reporting`, `http_status` and `legacy` stay light. The public names
are `omni_errors`' own (`omni_errors.classify`, `omni_errors.OmniClientError`, ...).
"""
