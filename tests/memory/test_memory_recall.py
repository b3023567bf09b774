"""Recall through an owner's own index: as owner- and embedder-scoped as the exact scan, and built by the
worker once an owner has enough memories for it to pay.

The index path is forced here by building an owner's index at a small size (the service builds it for
any group it is given); the size at which it pays is the benchmark's business (benchmarks/bench_recall.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from django.db import IntegrityError, connection, transaction
from pgvector.django import CosineDistance

from assistant.memory.store import (
    MEMORY_INDEX_MIN_ROWS,
    memories_clear,
    memory_index_build,
    memory_index_name,
    memory_recall,
    memory_remember,
)
from assistant.models import AgentMemory
from tests.conftest import WorkerProcess, _test_database_url, wait_for

DIMS = 16
LAB_A, LAB_B = "lab_a:bag-of-words", "lab_b:bag-of-words"


def unit(vector: np.ndarray) -> list[float]:
    return (vector / np.linalg.norm(vector)).astype(np.float32).tolist()


def points(seed: int, count: int, centre: np.ndarray) -> list[list[float]]:
    """`count` unit vectors scattered around `centre`."""
    random = np.random.default_rng(seed)
    return [unit(centre + 0.3 * random.standard_normal(DIMS)) for _ in range(count)]


def store(owner: Any, vectors: list[list[float]], *, label: str, embedder: str = LAB_A) -> None:
    AgentMemory.objects.bulk_create(
        AgentMemory(owner=owner, content=f"{label} {number}", embedding=vector, dims=len(vector), embedder=embedder)
        for number, vector in enumerate(vectors)
    )


def index_is_valid(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                       "WHERE c.relname = %s", [name])
        row = cursor.fetchone()
    return bool(row and row[0])


def exact_recall(owner: Any, question: list[float], embedder: str) -> list[str]:
    rows = AgentMemory.objects.filter(owner=owner, embedder=embedder).annotate(
        distance=CosineDistance("embedding", question)).order_by("distance")
    return list(rows.values_list("content", flat=True)[:5])


def index_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [name])
        return cursor.fetchone() is not None


def index_scans(name: str) -> int:
    """How many times PostgreSQL has scanned this index (its statistics are flushed on demand)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", [name])
        return int(cursor.fetchone()[0])


@pytest.fixture
def drop_memory_indexes() -> Iterator[None]:
    """Owners' indexes are DDL: emptying the tables between tests leaves them, so each test drops its own."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'i' AND relname LIKE 'memory\\_hnsw\\_%%'")
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')


@pytest.mark.django_db(transaction=True)
def test_recall_through_an_owners_index_never_returns_another_owners_memory(
    alice: Any, bob: Any, drop_memory_indexes: None
) -> None:
    centre = np.random.default_rng(1).standard_normal(DIMS)
    question = unit(centre)
    # Bob's 400 memories are all nearer the question than any of Alice's 200, and one of his is the question.
    store(alice, points(2, 200, centre + 1.5 * np.random.default_rng(3).standard_normal(DIMS)), label="alice")
    store(bob, [question, *points(4, 399, centre)], label="bob")
    # ...and so are Alice's own memories of another embedder of the same length.
    store(alice, [question, *points(5, 99, centre)], label="alice-b", embedder=LAB_B)
    name = memory_index_build(owner_id=alice.pk, spec="default", embedder=LAB_A, dims=DIMS)
    assert index_is_valid(name)

    scans = index_scans(name)
    recalled = memory_recall(owner=alice, spec="default", vector=question, embedder=LAB_A, limit=5)
    wait_for(lambda: index_scans(name) > scans, what="the index path to be taken, not an exact scan")
    assert len(recalled) == 5 and all(content.startswith("alice ") for content in recalled), recalled
    # Nearest first, as the exact scan of Alice's own memories of this embedder ranks them.
    assert recalled == exact_recall(alice, question, LAB_A)
    # Her memories of the other embedder are recalled by that embedder alone, through no index.
    assert memory_recall(owner=alice, spec="default", vector=question, embedder=LAB_B, limit=1) == ["alice-b 0"]


@pytest.mark.django_db(transaction=True)
def test_an_owners_index_answers_as_the_exact_scan_does(alice: Any, drop_memory_indexes: None) -> None:
    random = np.random.default_rng(7)
    store(alice, [unit(random.standard_normal(DIMS)) for _ in range(300)], label="alice")
    questions = [unit(random.standard_normal(DIMS)) for _ in range(10)]
    exact = [memory_recall(owner=alice, spec="default", vector=q, embedder=LAB_A, limit=5) for q in questions]
    memory_index_build(owner_id=alice.pk, spec="default", embedder=LAB_A, dims=DIMS)
    indexed = [memory_recall(owner=alice, spec="default", vector=q, embedder=LAB_A, limit=5) for q in questions]
    assert indexed == exact
    # Inside a caller's transaction, the index path's settings do not outlive the recall.
    with transaction.atomic(), connection.cursor() as cursor:
        assert memory_recall(owner=alice, spec="default", vector=questions[0], embedder=LAB_A, limit=5) == exact[0]
        cursor.execute("SELECT current_setting('enable_sort'), current_setting('hnsw.ef_search')")
        assert cursor.fetchone() == ("on", "40")
    # Another spec of the same owner has no index and is not in this one.
    assert memory_recall(owner=alice, spec="reader", vector=questions[0], embedder=LAB_A, limit=5) == []


@pytest.mark.django_db
def test_a_build_inside_a_transaction_is_refused_clearly(alice: Any) -> None:
    with pytest.raises(RuntimeError, match="cannot run inside a transaction"):
        memory_index_build(owner_id=alice.pk, spec="default", embedder=LAB_A, dims=DIMS)


@pytest.mark.django_db
def test_a_memory_whose_dims_lie_about_its_vector_is_refused(alice: Any) -> None:
    with pytest.raises(IntegrityError, match="memory_dims_match_embedding"):
        AgentMemory.objects.bulk_create([AgentMemory(owner=alice, content="x", embedding=[0.1] * DIMS, dims=384,
                                                     embedder=LAB_A)])


class FixedEmbedder:
    """Only its name and length matter to `memory_remember`, which is given the vector."""

    name = LAB_A
    dims = DIMS

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("memory_remember is given the vector")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_memory_that_makes_an_owner_heavy_has_the_worker_build_their_index(
    alice: Any, bob: Any, celery_worker: WorkerProcess, drop_memory_indexes: None
) -> None:
    centre = np.random.default_rng(11).standard_normal(DIMS)
    store(alice, points(12, MEMORY_INDEX_MIN_ROWS - 2, centre), label="alice")
    store(bob, points(13, 50, centre), label="bob")
    name = memory_index_name(owner_id=alice.pk, spec="default", embedder=LAB_A, dims=DIMS)
    question = unit(centre)

    memory_remember(owner=alice, spec="default", content="one short", vector=question, embedder=FixedEmbedder())
    assert not index_is_valid(name)  # one memory short: no index is asked for
    memory_remember(owner=alice, spec="default", content="the one", vector=question, embedder=FixedEmbedder())
    wait_for(lambda: index_is_valid(name), timeout=60, what="the worker to build Alice's index")

    recalled = memory_recall(owner=alice, spec="default", vector=question, embedder=LAB_A, limit=5)
    assert set(recalled[:2]) == {"one short", "the one"}
    assert not any(content.startswith("bob ") for content in recalled)


@pytest.mark.django_db(transaction=True)
def test_the_recall_benchmark_runs_at_a_tiny_size(
    capsys: pytest.CaptureFixture[str], drop_memory_indexes: None
) -> None:
    from benchmarks.bench_recall import run

    figures = run(20, heavy_rows=300, questions=4)
    printed = capsys.readouterr().out
    assert "20 ordinary owners x 100 + 1 heavy owner x 300 + 1 middling owner x 299 = 2,599 memories" in printed
    assert "bulk load (binary COPY" in printed and "heavy owners' indexes: 1 built" in printed
    assert AgentMemory.objects.count() == 20 * 100 + 300 + 299
    for kind in ("ordinary", "middling", "heavy"):
        assert figures[kind]["recall"] >= 0.95, (kind, figures[kind])
        assert figures[kind]["p50"] > 0 and figures[kind]["base_p50"] > 0


@pytest.mark.django_db(transaction=True)
def test_a_build_already_under_way_is_left_to_finish_and_a_failed_one_is_redone(
    alice: Any, drop_memory_indexes: None
) -> None:
    store(alice, points(21, 50, np.random.default_rng(20).standard_normal(DIMS)), label="alice")
    group = {"owner_id": alice.pk, "spec": "default", "embedder": LAB_A, "dims": DIMS}
    name = memory_index_name(**group)
    with psycopg.connect(_test_database_url(), autocommit=True) as other:  # another worker, building it
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", [name])
        assert memory_index_build(**group) == name
        assert not index_is_valid(name)  # not built twice at once
        # Its build over: let go of the lock now, as a build does, rather than when the server gets round to
        # ending the closed session's backend (a moment later on a busy machine, and this call would skip).
        other.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])
    memory_index_build(**group)
    assert index_is_valid(name)

    # What a concurrent build that failed half-way leaves behind: an index PostgreSQL never uses.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [name])
    memory_index_build(**group)
    assert index_is_valid(name)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_clearing_ones_memories_drops_ones_indexes_and_nobody_elses(
    alice: Any, bob: Any, celery_worker: WorkerProcess, drop_memory_indexes: None
) -> None:
    centre = np.random.default_rng(30).standard_normal(DIMS)
    for owner, seed in ((alice, 31), (bob, 32)):
        store(owner, points(seed, 40, centre), label=owner.username)
    built = {owner.username: memory_index_build(owner_id=owner.pk, spec="default", embedder=LAB_A, dims=DIMS)
             for owner in (alice, bob)}

    assert memories_clear(owner=alice) == 40
    wait_for(lambda: not index_exists(built["alice"]), what="the worker to drop Alice's emptied index")
    assert index_is_valid(built["bob"])
    assert memory_recall(owner=bob, spec="default", vector=unit(centre), embedder=LAB_A, limit=1)[0].startswith("bob ")


@pytest.mark.django_db(transaction=True)
def test_an_embedder_or_spec_name_with_quotes_is_data_in_the_index_predicate(
    alice: Any, drop_memory_indexes: None
) -> None:
    embedder, spec = "lab'); DROP TABLE assistant_agentmemory; --:x\\", "it's"
    centre = np.random.default_rng(40).standard_normal(DIMS)
    vectors = points(41, 30, centre)
    AgentMemory.objects.bulk_create(
        AgentMemory(owner=alice, spec=spec, content=f"quoted {n}", embedding=v, dims=DIMS, embedder=embedder)
        for n, v in enumerate(vectors)
    )
    name = memory_index_build(owner_id=alice.pk, spec=spec, embedder=embedder, dims=DIMS)
    assert index_is_valid(name)
    scans = index_scans(name)
    recalled = memory_recall(owner=alice, spec=spec, vector=vectors[3], embedder=embedder, limit=1)
    wait_for(lambda: index_scans(name) > scans, what="the index path to be taken")
    assert recalled == ["quoted 3"]
    assert AgentMemory.objects.count() == 30
