"""Benchmarks: `make bench` runs every `benchmarks/bench_*.py` module's `main()`; each prints its figures
and the ratio to a baseline it measures in the same run."""


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` (0.95 for p95) of the sorted values, by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]
