"""Benchmarks run apart from the tests: `pytest benches --benchmark-only`."""
