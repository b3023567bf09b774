"""One worker's sweeps, in a process of its own: `python -m tests.faults.sweep START SWEEPS [START SWEEPS ...]`.

For each (START, SWEEPS) pair it waits until the wall-clock time START, then sweeps SWEEPS times in a
row, as a worker's timer would. Several of these started together race like the sweeps of several
workers. Prints the ids each sweep said it re-enqueued, as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> None:
    import django

    django.setup()
    from assistant.turn.sweeper import sweep_runs

    requeued: list[int] = []
    for start, sweeps in zip(argv[0::2], argv[1::2], strict=True):
        time.sleep(max(0.0, float(start) - time.time()))
        for _ in range(int(sweeps)):
            requeued += sweep_runs()["requeued"]
    print(json.dumps(requeued))


if __name__ == "__main__":
    main(sys.argv[1:])
