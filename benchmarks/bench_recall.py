"""Recall at scale: `memory_recall` over many owners' memories, in a throwaway database.

Full scale (the issue's): 1,000,000 memories x 384 dimensions over 10,000 owners (100 each) plus one
heavy owner with 100,000 (and one middling owner, below). `make bench` runs a smaller default, 2,000
ordinary owners (set `BENCH_RECALL_SCALE=full`, or a number of ordinary owners, for another size); the
heavy owner keeps its 100,000 memories at every size, since it is the case an exact scan cannot serve.
Which size ran is printed.

The vectors are clustered like sentence embeddings: 2,000 topics shared by everyone, each owner writing
about a few of them (the heavy owner about many) in their own manner, plus noise; unit length. A question
is a new point drawn the same way for the same owner. Memories go in by binary COPY (the load time is
printed), then the heavy owner's index is built by the same service a deployment runs.

Figures per owner kind (ordinary; middling, one memory short of an index of its own, so the slowest
exact scan recall makes; heavy): p50/p95 latency of `memory_recall`, and recall@5 against the exact
answer. The baseline, in the same run and interleaved question by question, is the query recall made
before (an exact cosine scan of the owner's rows). Latencies are wall time on a shared machine: read the
ratios, not the milliseconds.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection
from pgvector.django import CosineDistance

from benchmarks import percentile

DIMS = 384
TOPICS = 2_000
PER_OWNER = 100
HEAVY_ROWS = 100_000
FULL_OWNERS = 10_000
DEFAULT_OWNERS = 2_000
EMBEDDER = "bench:clustered-384"
SPEC = "default"
LIMIT = 5
QUESTIONS = 60
TARGET_P95_MS = 20.0
TARGET_RECALL = 0.95
CHUNK = 20_000
_EPOCH_2000_US = int(datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC).timestamp() * 1_000_000)


def scale_from_environment() -> int:
    """How many ordinary owners: `BENCH_RECALL_SCALE` is `full` or a number; the default is smaller."""
    raw = os.environ.get("BENCH_RECALL_SCALE", "").strip().lower()
    if not raw:
        return DEFAULT_OWNERS
    if raw == "full":
        return FULL_OWNERS
    owners = int(raw)
    if owners < 1:
        raise ValueError(f"BENCH_RECALL_SCALE must be 'full' or a positive number of owners, not {raw!r}")
    return owners


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


@dataclass
class Corpus:
    """Draws owners' memories and questions from shared topics: what makes the data look like text."""

    seed: int = 13

    def __post_init__(self) -> None:
        self.random = np.random.default_rng(self.seed)
        self.topics = _unit(self.random.standard_normal((TOPICS, DIMS), dtype=np.float32))

    def owner(self, owner_id: int, *, heavy: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """An owner's topics (a few, or many for a heavy one) and manner (a direction of their own)."""
        random = np.random.default_rng((self.seed, owner_id))
        topics = random.choice(TOPICS, size=200 if heavy else 6, replace=False)
        manner = _unit(random.standard_normal(DIMS, dtype=np.float32))
        return topics, manner

    def points(self, owner_id: int, count: int, *, heavy: bool = False, salt: int = 0) -> np.ndarray:
        """`count` unit vectors of this owner: topic + manner + noise, the noise the largest part, so that two
        memories of one topic have a cosine similarity of about 0.5, as related sentences do."""
        topics, manner = self.owner(owner_id, heavy=heavy)
        random = np.random.default_rng((self.seed, owner_id, salt))
        chosen = self.topics[random.choice(topics, size=count)]
        noise = random.standard_normal((count, DIMS), dtype=np.float32) / np.sqrt(DIMS)
        return _unit(chosen + 0.4 * manner + 1.0 * noise).astype(np.float32)


def _copy_rows(owner_ids: np.ndarray, vectors: np.ndarray, first_index: int) -> bytes:
    """Rows of assistant_agentmemory in PostgreSQL's binary COPY format (no header), built with NumPy."""
    count = len(owner_ids)
    spec, embedder = SPEC.encode(), EMBEDDER.encode()
    row = np.dtype([
        ("fields", ">i2"),
        ("owner_len", ">i4"), ("owner", ">i4"),
        ("spec_len", ">i4"), ("spec", f"S{len(spec)}"),
        ("content_len", ">i4"), ("content", "S13"),
        ("vector_len", ">i4"), ("vector_dims", ">i2"), ("vector_unused", ">i2"), ("vector", ">f4", (DIMS,)),
        ("dims_len", ">i4"), ("dims", ">i4"),
        ("embedder_len", ">i4"), ("embedder", f"S{len(embedder)}"),
        ("created_len", ">i4"), ("created", ">i8"),
    ])
    rows = np.zeros(count, dtype=row)
    rows["fields"] = 7
    rows["owner_len"], rows["owner"] = 4, owner_ids
    rows["spec_len"], rows["spec"] = len(spec), spec
    rows["content_len"] = 13
    rows["content"] = np.char.add(b"memory", np.char.zfill(np.arange(first_index, first_index + count).astype("S7"), 7))
    rows["vector_len"], rows["vector_dims"], rows["vector"] = 4 + 4 * DIMS, DIMS, vectors
    rows["dims_len"], rows["dims"] = 4, DIMS
    rows["embedder_len"], rows["embedder"] = len(embedder), embedder
    now_us = int(time.time() * 1_000_000) - _EPOCH_2000_US
    rows["created_len"], rows["created"] = 8, now_us - np.arange(count)
    return rows.tobytes()


def _chunks(
    corpus: Corpus, ordinary: list[int], big: dict[int, int]
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(owner ids, vectors) in chunks; the big owners' memories (`big`: owner id -> rows) interleaved with
    everyone else's, as they would be written over time, so their rows are spread over the whole table."""
    per_chunk = max(1, CHUNK // PER_OWNER)
    batches = [ordinary[start:start + per_chunk] for start in range(0, len(ordinary), per_chunk)]
    written = dict.fromkeys(big, 0)
    for number, batch in enumerate(batches):
        owners = [np.repeat(np.array(batch, dtype=np.int32), PER_OWNER)]
        vectors = [corpus.points(owner, PER_OWNER) for owner in batch]
        for owner, rows in big.items():
            take = min(-(-rows // len(batches)), rows - written[owner])
            owners.append(np.full(take, owner, dtype=np.int32))
            vectors.append(corpus.points(owner, take, heavy=True, salt=number + 1))
            written[owner] += take
        order = np.random.default_rng(number).permutation(sum(len(ids) for ids in owners))
        yield np.concatenate(owners)[order], np.concatenate(vectors)[order]


def load(corpus: Corpus, owners: int, big_rows: list[int]) -> tuple[list[int], list[int], float]:
    """Create the owners and COPY their memories: `owners` ordinary ones and one per `big_rows` entry with
    that many; returns (ordinary owner ids, big owner ids, seconds)."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
            "is_active, date_joined) SELECT '!', false, 'owner' || n, '', '', '', false, true, now() "
            "FROM generate_series(1, %s) n ORDER BY n RETURNING id", [owners + len(big_rows)])
        ids = [row[0] for row in cursor.fetchall()]
        big, ordinary = ids[:len(big_rows)], ids[len(big_rows):]
        raw = cursor.connection  # psycopg's own connection, for COPY
        index = 0
        with raw.cursor() as copying, copying.copy(
            "COPY assistant_agentmemory (owner_id, spec, content, embedding, dims, embedder, created_at) "
            "FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8)
            for owner_ids, vectors in _chunks(corpus, ordinary, dict(zip(big, big_rows, strict=True))):
                copy.write(_copy_rows(owner_ids, vectors, index))
                index += len(owner_ids)
            copy.write(b"\xff\xff")
        cursor.execute("VACUUM (ANALYZE) assistant_agentmemory")
    return ordinary, big, time.perf_counter() - started


def exact_recall(*, owner_id: int, vector: list[float]) -> list[str]:
    """The query recall made before this benchmark existed: an exact cosine scan of the owner's rows."""
    from assistant.models import AgentMemory

    rows = (
        AgentMemory.objects.filter(owner_id=owner_id, spec=SPEC, embedder=EMBEDDER, dims=len(vector))
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "-id")
        .values_list("content", flat=True)[:LIMIT]
    )
    return list(rows)


def _timed(fn: Callable[[], list[str]]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000, result


def measure(corpus: Corpus, kind: str, owner_ids: list[int], *, heavy: bool, questions: int) -> dict[str, float]:
    """Ask `questions` questions, each of a different owner of this kind (the same owner, if heavy), through
    `memory_recall` and through the exact query, alternating which goes first."""
    from django.contrib.auth import get_user_model

    from assistant.memory.store import memory_recall

    users = get_user_model().objects.in_bulk(owner_ids)
    ours, baseline, found = [], [], []
    for number in range(questions):
        owner_id = owner_ids[number % len(owner_ids)]
        vector = corpus.points(owner_id, 1, heavy=heavy, salt=1_000_000 + number)[0].tolist()

        def recall(owner_id: int = owner_id, vector: list[float] = vector) -> list[str]:
            return memory_recall(owner=users[owner_id], spec=SPEC, vector=vector, embedder=EMBEDDER, limit=LIMIT)

        def exact(owner_id: int = owner_id, vector: list[float] = vector) -> list[str]:
            return exact_recall(owner_id=owner_id, vector=vector)

        if number == 0:  # warm both paths' caches and plans once
            recall(), exact()
        if number % 2 == 0:
            took_ours, answer = _timed(recall)
            took_exact, truth = _timed(exact)
        else:
            took_exact, truth = _timed(exact)
            took_ours, answer = _timed(recall)
        ours.append(took_ours)
        baseline.append(took_exact)
        found.append(len(set(answer) & set(truth)) / max(1, len(truth)))
    figures = {
        "p50": statistics.median(ours), "p95": percentile(ours, 0.95),
        "base_p50": statistics.median(baseline), "base_p95": percentile(baseline, 0.95),
        "recall": statistics.mean(found), "worst": min(found),
    }
    print(f"{kind:>8}: recall p50 {figures['p50']:7.2f} ms, p95 {figures['p95']:7.2f} ms; "
          f"exact (before) p50 {figures['base_p50']:7.2f} ms, p95 {figures['base_p95']:7.2f} ms; "
          f"ratio p50 x{figures['p50'] / figures['base_p50']:.2f}, "
          f"p95 x{figures['p95'] / figures['base_p95']:.2f}; "
          f"recall@{LIMIT} {figures['recall']:.3f} (worst question {figures['worst']:.1f})")
    return figures


def run(owners: int, *, heavy_rows: int = HEAVY_ROWS, questions: int = QUESTIONS) -> dict[str, dict[str, float]]:
    """Load, index the heavy owner, measure each kind; returns the figures per kind. Beside the heavy owner,
    a "middling" one has one memory fewer than earns an index: the slowest exact scan recall makes. (A test
    runs it at a tiny size, with the heavy owner indexed whatever the threshold.)"""
    from assistant.memory.store import MEMORY_INDEX_MIN_ROWS, memory_index_heavy_owners

    corpus = Corpus()
    threshold = min(heavy_rows, MEMORY_INDEX_MIN_ROWS)
    ordinary, (heavy, middling), load_s = load(corpus, owners, [heavy_rows, threshold - 1])
    total = owners * PER_OWNER + heavy_rows + threshold - 1
    print(f"size: {owners:,} ordinary owners x {PER_OWNER} + 1 heavy owner x {heavy_rows:,} + 1 middling owner x "
          f"{threshold - 1:,} = {total:,} memories "
          f"x {DIMS} dims ({'full' if owners == FULL_OWNERS else 'reduced; BENCH_RECALL_SCALE=full for the issue’s'})")
    print(f"bulk load (binary COPY + VACUUM ANALYZE): {load_s:.1f} s, {total / load_s:,.0f} rows/s")
    started = time.perf_counter()
    built = memory_index_heavy_owners(min_rows=threshold)
    print(f"heavy owners' indexes: {len(built)} built in {time.perf_counter() - started:.1f} s")
    sample = ordinary[:: max(1, len(ordinary) // questions)][:questions]
    figures = {
        "ordinary": measure(corpus, "ordinary", sample, heavy=False, questions=questions),
        "middling": measure(corpus, "middling", [middling], heavy=True, questions=questions),
        "heavy": measure(corpus, "heavy", [heavy], heavy=True, questions=questions),
    }
    worst_p95 = max(f["p95"] for f in figures.values())
    worst_recall = min(f["recall"] for f in figures.values())
    verdict = "meets" if worst_p95 <= TARGET_P95_MS and worst_recall >= TARGET_RECALL else "MISSES"
    print(f"goal p95 <= {TARGET_P95_MS:.0f} ms for every owner and recall@{LIMIT} >= {TARGET_RECALL}: {verdict} "
          f"(worst p95 {worst_p95:.1f} ms, worst recall {worst_recall:.3f}; load average {os.getloadavg()[0]:.1f})")
    return figures


def main() -> None:
    owners = scale_from_environment()
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "bench_recall"
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run(owners)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
