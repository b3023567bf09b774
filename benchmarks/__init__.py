"""Benchmarks: `make bench` runs every `benchmarks/bench_*.py` module's `main()`; each prints its figures
and the ratio to a baseline it measures in the same run."""
