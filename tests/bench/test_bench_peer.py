"""The comparison with the peer installs a package from PyPI: a plain `make bench` must not do it unasked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_peer


def test_a_plain_bench_run_skips_the_peer_installs_nothing_and_says_how_to_run_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("BENCH_PEER", raising=False)
    monkeypatch.setattr("sys.argv", ["benchmarks"])  # `python -m benchmarks`, every benchmark, none named
    monkeypatch.setattr(bench_peer, "PEER_VENV", tmp_path / "peer-venv")

    bench_peer.main()

    assert not (tmp_path / "peer-venv").exists()
    said = capsys.readouterr().out
    assert said.startswith("skipped:")
    assert "python -m benchmarks peer" in said and "BENCH_PEER=1" in said
