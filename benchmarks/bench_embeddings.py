"""Throughput of the `local` embedder (all-MiniLM-L6-v2 on NumPy) on short sentences.

Figures are medians over several runs of ~500 sentences. Baselines measured in the same run:
the tokenizer alone (the floor no forward pass can beat) and the same model fed one sentence
per call (what batching buys). The issue's target is at least 200 sentences/s on 2 cores.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from collections.abc import Callable

from assistant.embeddings import get_embedder
from assistant.embeddings.minilm import get_model

RUNS = 5
TARGET_PER_SECOND = 200

_SUBJECTS = ["The release", "My manager", "The login page", "Our database", "The new intern", "This task",
             "The weekly report", "The staging server", "Alice", "The design review"]
_VERBS = ["is blocked by", "depends on", "was moved after", "needs a comment about", "should mention",
          "was assigned to", "keeps failing because of", "is waiting for"]
_OBJECTS = ["the billing bug", "Friday's deadline", "a missing permission", "the tracker project",
            "Bob's code review", "the slow search query", "the holiday schedule", "a flaky test",
            "the customer call", "version two"]


def short_sentences(count: int = 500) -> list[str]:
    """Distinct, deterministic task-tracker sentences of 6-12 words, like memories and messages."""
    combos = itertools.product(_SUBJECTS, _VERBS, _OBJECTS)
    return [f"{s} {v} {o}." for s, v, o in itertools.islice(combos, count)]


def _median_seconds(fn: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    sentences = short_sentences()
    embedder = get_embedder("local")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    started = time.perf_counter()
    model = get_model()
    load_s = time.perf_counter() - started
    word_pieces = sum(len(ids) for ids in model.tokenize(sentences))
    embedder.embed(sentences[:32])  # warm the BLAS threads and allocator once

    cpu_started = time.process_time()
    batched_s = _median_seconds(lambda: embedder.embed(sentences))
    # CPU seconds are less sensitive than wall time to other processes sharing the cores.
    cpu_per_run = (time.process_time() - cpu_started) / RUNS
    tokenizer_s = _median_seconds(lambda: model.tokenize(sentences))
    one_at_a_time = sentences[:100]
    single_s = _median_seconds(lambda: [embedder.embed([s]) for s in one_at_a_time], runs=3)

    batched_rate = len(sentences) / batched_s
    single_rate = len(one_at_a_time) / single_s
    tokenizer_rate = len(sentences) / tokenizer_s
    print(f"CPUs available: {cpus}; {len(sentences)} sentences, {word_pieces / len(sentences):.1f} word pieces each "
          f"incl. [CLS]/[SEP]; weights load once per process in {load_s * 1000:.0f} ms")
    print(f"local embedder, batched:          {batched_rate:8.0f} sentences/s  (median of {RUNS} runs)")
    print(f"  CPU time per run {cpu_per_run:.2f} s for {batched_s:.2f} s wall: "
          f"{len(sentences) / cpu_per_run:.0f} sentences per CPU-second, "
          f"load average now {os.getloadavg()[0]:.1f}")
    print(f"baseline, one sentence per call:  {single_rate:8.0f} sentences/s  (median of 3 runs of 100)")
    print(f"baseline, tokenizer alone:        {tokenizer_rate:8.0f} sentences/s")
    print(f"batched / one-per-call: {batched_rate / single_rate:.1f}x; "
          f"tokenizing is {tokenizer_s / batched_s:.1%} of the batched time")
    verdict = "meets" if batched_rate >= TARGET_PER_SECOND else "MISSES"
    print(f"target >= {TARGET_PER_SECOND} sentences/s: {verdict}")
