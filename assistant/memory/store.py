"""What the assistant remembers across conversations, per owner and spec (the seed's agent memory).

Recall ranks the owner's memories made by the same embedder (same name, same vector length) by cosine
distance to the embedding of the last user turn. Vectors of two embedders are never compared, even of
the same length: their spaces have nothing in common. A failing embedder means "recall nothing", never a
failed turn.

How, by measurement (benchmarks/bench_recall.py): for most owners an exact scan of their rows, through
the (owner, spec, embedder, dims) btree: about two milliseconds at a hundred rows, but ~260 ms for an
owner with 100,000 among a million (their rows are spread over as many pages). pgvector here (0.6.2) has
no iterative index scans: one HNSW index over everyone, filtered by owner afterwards, hands back
`hnsw.ef_search` candidates of which few or none are the owner's. So an owner whose rows (of one spec
and embedder) pass `MEMORY_INDEX_MIN_ROWS` gets an HNSW index of their own: a partial index whose
predicate is exactly that owner, spec, embedder and length, over `embedding::vector(dims)` (a column
without dimensions cannot be indexed, a cast of it can). Every row such an index holds is one recall may
return, so filtering loses nothing and the answer stays owner- and embedder-scoped by construction, not
by luck. It is built concurrently, after commit, by a task (`memory_index_build`), and recall uses it
once PostgreSQL marks it valid (each process re-reads which are at most every 30 s: until then, the
exact scan answers, as rightly if more slowly).

A memory is what the person asked and what the assistant answered, never a tool's raw output; it is
recalled as data (see assistant.turn.context), never into the system prompt.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from django.db import connection, models, transaction
from django.db.models import QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField
from psycopg import sql

from assistant.embeddings import Embedder
from assistant.infra.worker_queue import worker_queue
from assistant.models import AgentMemory

logger = logging.getLogger(__name__)

# From this many memories of one (owner, spec, embedder, dims) an index of their own pays. Measured among
# 1.1M memories: 4,999 rows scan exactly in ~4.5 ms while their pages stay in shared buffers, but a row
# read from the OS cache costs ~2.6 us (100,000 rows: ~260 ms). An index is built in a second or two at
# this size, 25-40 s at 100,000 rows.
MEMORY_INDEX_MIN_ROWS = 5_000
# HNSW candidates per recall: the index holds only rows recall may return, so this is for accuracy alone.
# Clustered vectors (topics) trap a narrow search in the wrong cluster: on the benchmark's data, 40 (the
# default) found none of the right five for 6% of questions and 100 for 1.5%; 200 misses at most one of
# five (recall@5 0.995) for ~1 ms more than 100.
MEMORY_INDEX_EF_SEARCH = 200


def memory_recall(*, owner: Any, spec: str, vector: list[float], embedder: str, limit: int,
                  others_text: list[dict[str, Any]] | None = None) -> list[str]:
    """The contents of the owner's `limit` memories closest to `vector` (an embedding of what was asked by
    the embedder named `embedder`), among those that embedder made. `others_text`, when given, is extended
    with the text by others each recalled memory carries (what the run that saved it had read)."""
    if limit <= 0 or not vector or not embedder:
        return []
    dims = len(vector)
    rows = AgentMemory.objects.filter(owner=owner, spec=spec, embedder=embedder, dims=dims)
    owner_id = owner if isinstance(owner, int) else owner.pk
    if memory_index_name(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims) not in _ready_indexes():
        exact = rows.annotate(distance=CosineDistance("embedding", vector)).order_by("distance", "-id")
        return _recalled(exact.values_list("content", "others_text")[:limit], others_text)
    # The very expression the index is built on, and nothing after it in ORDER BY: else no index scan.
    nearest = rows.annotate(
        distance=CosineDistance(Cast("embedding", VectorField(dimensions=dims)), vector)
    ).order_by("distance")
    in_callers_transaction = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(MEMORY_INDEX_EF_SEARCH, limit)])
        # The index is there because a sort of all these rows is slow, whatever the statistics say: an owner
        # who just became heavy is still "a few rows" to the planner until the table is analysed again.
        cursor.execute("SET LOCAL enable_sort = off")
        recalled = _recalled(nearest.values_list("content", "others_text")[:limit], others_text)
        if in_callers_transaction:  # SET LOCAL lasts until the caller's transaction ends: not past this query
            cursor.execute("SET LOCAL hnsw.ef_search TO DEFAULT")
            cursor.execute("SET LOCAL enable_sort TO DEFAULT")
        return recalled


def _recalled(rows: Any, others_text: list[dict[str, Any]] | None) -> list[str]:
    contents = []
    for content, carried in rows:
        contents.append(content)
        if others_text is not None and carried:
            others_text.extend(carried)
    return contents


def memory_remember(*, owner: Any, spec: str, content: str, vector: list[float], embedder: Embedder,
                    others_text: list[dict[str, Any]] | None = None) -> AgentMemory:
    """Store one exchange under `vector`, the embedding of what was asked: a later question is matched
    against earlier questions, which is what recall compares, and the turn embeds only once. The memory
    that takes its owner past `MEMORY_INDEX_MIN_ROWS` (of this spec and embedder) asks for their index.
    `others_text`: the text by others the run had read, which whoever recalls the memory reads too."""
    memory = AgentMemory.objects.create(owner=owner, spec=spec, content=content, embedding=vector,
                                        embedder=embedder.name, others_text=others_text or [])
    owner_id, name, dims = memory.owner_id, embedder.name, memory.dims
    # Asked again while it is being built, or after a build failed: the task sorts that out (one at a time).
    if memory_index_name(owner_id=owner_id, spec=spec, embedder=name, dims=dims) not in _ready_indexes() and (
        _has_at_least(MEMORY_INDEX_MIN_ROWS, owner_id=owner_id, spec=spec, embedder=name, dims=dims)
    ):
        transaction.on_commit(lambda: worker_queue().memory_index_build(owner_id=owner_id, spec=spec, embedder=name,
                                                                        dims=dims))
    return memory


# --- per-owner indexes -----------------------------------------------------------------------------------


def memory_index_name(*, owner_id: int, spec: str, embedder: str, dims: int) -> str:
    """The name of the HNSW index of one owner's memories of one spec and embedder: a digest of the
    group, so that any name fits PostgreSQL's 63 characters and one group has exactly one index."""
    digest = hashlib.sha256(f"{owner_id}\0{spec}\0{embedder}\0{dims}".encode()).hexdigest()[:16]
    return f"memory_hnsw_{owner_id}_{digest}"


class _ReadyIndexes:
    """The names of the valid memory indexes, re-read at most every `TTL_SECONDS` per process: recall of
    an ordinary owner then costs no round trip to learn that it has none. A stale answer is still a
    right one: an index built since is used a little later; one dropped since leaves recall's query to
    an exact scan of the same rows."""

    TTL_SECONDS = 30.0

    def __init__(self) -> None:
        self.names: frozenset[str] = frozenset()
        self.read_at = float("-inf")

    def __call__(self) -> frozenset[str]:
        if time.monotonic() - self.read_at > self.TTL_SECONDS:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                    "WHERE i.indrelid = %s::regclass AND c.relname LIKE 'memory\\_hnsw\\_%%' "
                    "AND i.indisvalid AND i.indisready",
                    [AgentMemory._meta.db_table],
                )
                self.names = frozenset(name for (name,) in cursor.fetchall())
            self.read_at = time.monotonic()
        return self.names

    def forget(self) -> None:
        self.read_at = float("-inf")


_ready_indexes = _ReadyIndexes()


def _index_ready(name: str) -> bool:
    """Built and valid: a concurrent build in progress, or one that failed half-way, is not used."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = %s AND i.indisvalid AND i.indisready",
            [name],
        )
        return cursor.fetchone() is not None


def _has_at_least(count: int, *, owner_id: int, spec: str, embedder: str, dims: int) -> bool:
    """Whether the group has `count` rows, reading no more than that many index entries."""
    rows = AgentMemory.objects.filter(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)
    return rows.order_by().values("id")[count - 1:count].exists()


def memory_index_build(*, owner_id: int, spec: str, embedder: str, dims: int) -> str:
    """Build the owner's HNSW index for one spec and embedder if it is missing (or a previous build
    failed half-way); returns its name. Concurrently, so other people's memories go on being written:
    call it outside any transaction (a task does, after the commit that asked for it). While one build
    of it runs, another call returns at once."""
    if connection.in_atomic_block:
        raise RuntimeError("memory_index_build builds concurrently and cannot run inside a transaction.")
    name = memory_index_name(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [name])
        if not cursor.fetchone()[0]:
            return name  # being built by someone else right now
    try:
        if not _index_ready(name):
            _build(name, owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])
    return name


def _build(name: str, *, owner_id: int, spec: str, embedder: str, dims: int) -> None:
    statement = sql.SQL(
        "CREATE INDEX CONCURRENTLY {name} ON {table} USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
        "WHERE owner_id = {owner} AND spec = {spec} AND embedder = {embedder} AND dims = {dims}"
    ).format(
        name=sql.Identifier(name), table=sql.Identifier(AgentMemory._meta.db_table), dims=sql.Literal(int(dims)),
        owner=sql.Literal(int(owner_id)), spec=sql.Literal(spec), embedder=sql.Literal(embedder),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))  # a failed one
        # The graph of 100,000 vectors of 384 is ~200 MB; built in memory it is several times faster.
        cursor.execute("SET maintenance_work_mem = '512MB'")
        try:
            cursor.execute(statement)
        finally:
            cursor.execute("RESET maintenance_work_mem")
    _ready_indexes.forget()
    logger.info("Built the memory index %s (owner %s, spec %r, embedder %r, %s dims)", name, owner_id, spec,
                embedder, dims)


def _owner_index_names(owner_id: int, names: frozenset[str] | set[str]) -> set[str]:
    prefix = f"memory_hnsw_{int(owner_id)}_"
    return {name for name in names if name.startswith(prefix)}


def memory_index_drop_empty(*, owner_id: int) -> list[str]:
    """Drop the owner's indexes that no memory of theirs is in any more (after they cleared them), valid
    or not; returns their names. Concurrently, outside any transaction, like a build."""
    if connection.in_atomic_block:
        raise RuntimeError("memory_index_drop_empty drops concurrently and cannot run inside a transaction.")
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'i' AND relname LIKE 'memory\\_hnsw\\_%%'")
        names = _owner_index_names(owner_id, {name for (name,) in cursor.fetchall()})
    groups = AgentMemory.objects.filter(owner_id=owner_id).order_by().values_list("spec", "embedder", "dims").distinct()
    in_use = {memory_index_name(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)
              for spec, embedder, dims in groups}
    dropped = sorted(names - in_use)
    with connection.cursor() as cursor:
        for name in dropped:
            cursor.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    _ready_indexes.forget()
    return dropped


def memory_index_heavy_owners(*, min_rows: int = MEMORY_INDEX_MIN_ROWS) -> list[str]:
    """Build every missing index of a group with at least `min_rows` memories (after a bulk import, or
    for memories written before indexes existed); returns the names of the indexes now in place."""
    groups = (
        AgentMemory.objects.order_by().values("owner_id", "spec", "embedder", "dims")
        .annotate(rows=models.Count("id")).filter(rows__gte=min_rows)
    )
    return [memory_index_build(owner_id=g["owner_id"], spec=g["spec"], embedder=g["embedder"], dims=g["dims"])
            for g in groups]


# --- the person's own view of their memories (the memories page) ---------------------------------------


def memories_list(*, owner: Any, query: str = "") -> QuerySet[AgentMemory]:
    """The owner's memories, newest first; with `query`, only those whose content contains it (ignoring
    case; none for a query with NUL, which no memory can contain). Nobody else's rows are ever in it."""
    memories = AgentMemory.objects.filter(owner=owner).only("id", "spec", "content", "created_at")
    if "\x00" in query:
        # PostgreSQL text cannot hold NUL, neither in a query nor in a memory: nothing contains it.
        return memories.none()
    if query:
        memories = memories.filter(content__icontains=query)
    return memories.order_by("-created_at", "-id")


class MemoryNotFound(Exception):
    """No such memory of this owner: another person's and a missing one are indistinguishable on purpose."""


@transaction.atomic
def memory_delete(*, owner: Any, memory_id: Any) -> AgentMemory:
    """Forget one of the owner's memories; returns it as it was (for the message that says what went)."""
    try:
        memory = AgentMemory.objects.select_for_update().get(owner=owner, pk=int(memory_id))
    except (AgentMemory.DoesNotExist, TypeError, ValueError):
        raise MemoryNotFound(f"No memory {memory_id!r}.") from None
    memory.delete()
    return memory


@transaction.atomic
def memories_clear(*, owner: Any) -> int:
    """Forget everything the assistant remembers of the owner, under every spec; returns how many went.
    Their indexes, now empty, are dropped after commit (concurrently, by a task)."""
    _, per_model = AgentMemory.objects.filter(owner=owner).delete()
    owner_id = owner if isinstance(owner, int) else owner.pk
    if _owner_index_names(owner_id, _ready_indexes()):
        transaction.on_commit(lambda: worker_queue().memory_index_drop_empty(owner_id=owner_id))
    return per_model.get(AgentMemory._meta.label, 0)
