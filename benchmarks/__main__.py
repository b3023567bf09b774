"""Run the benchmarks: `python -m benchmarks [NAME ...]` (names without the `bench_` prefix)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time

import django


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    import benchmarks

    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    wanted = [f"bench_{name.removeprefix('bench_')}" for name in argv]
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"Unknown benchmark(s): {', '.join(unknown)}. Known: {', '.join(names)}", file=sys.stderr)
        return 2
    for name in wanted or names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"benchmarks.{name}").main()
        print(f"--- {name} took {time.perf_counter() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
