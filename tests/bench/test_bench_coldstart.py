"""A smoke test of the cold-start benchmark's code at the smallest size (the benchmark itself is `make bench`)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from benchmarks import bench_coldstart


def test_the_baseline_project_is_timed_from_exec_to_ready_with_its_module_count(tmp_path: Path) -> None:
    bench_coldstart._bare_project(tmp_path)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "baseline.settings"}
    started = time.monotonic()
    seconds, modules = bench_coldstart._time(sys.executable, bench_coldstart.BARE, cwd=tmp_path, env=env)
    # A part of the child's life, in seconds: no longer than the whole of it, timed around the call.
    assert 0 < seconds <= time.monotonic() - started
    assert modules > 300  # Django and its contrib apps were set up, not an empty interpreter


def test_the_peer_is_reported_as_not_measured_when_no_peer_virtualenv_exists(tmp_path: Path) -> None:
    assert bench_coldstart.peer_cold_start(1, python=tmp_path / "peer-venv" / "bin" / "python") is None
