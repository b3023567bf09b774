"""One worker's sweeps, in a process of its own: `python -m tests.faults.sweep OFFSET SWEEPS [OFFSET SWEEPS ...]`.

Once Django is set up it prints `ready` and waits for one line on its standard input: the wall-clock time
the race starts at. For each (OFFSET, SWEEPS) pair it then waits until that time plus OFFSET seconds and
sweeps SWEEPS times in a row, as a worker's timer would. Several of these started together race like the
sweeps of several workers, however long each took to start. Prints the ids each sweep said it
re-enqueued, as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> None:
    import django

    django.setup()
    from assistant.turn.sweeper import sweep_runs

    print("ready", flush=True)
    start = float(sys.stdin.readline())
    requeued: list[int] = []
    for offset, sweeps in zip(argv[0::2], argv[1::2], strict=True):
        time.sleep(max(0.0, start + float(offset) - time.time()))
        for _ in range(int(sweeps)):
            requeued += sweep_runs()["requeued"]
    print(json.dumps(requeued))


if __name__ == "__main__":
    main(sys.argv[1:])
