"""Failover across providers and the Redis circuit breaker every worker shares, over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from assistant.llm import AllProvidersFailedError, Message, ModelError, get_model
from assistant.llm.failover import FailoverModel
from assistant.testing.providers import (
    FakeOpenAIServer,
    error_reply,
    openai_completion,
    openai_stream,
    provider_settings,
)
from tests.conftest import PROJECT_DIR

HELLO = [Message.user("hello")]


@pytest.fixture(autouse=True)
def clean_breakers() -> Iterator[None]:
    client = redis.Redis.from_url(settings.REDIS_URL)

    def wipe() -> None:
        for pattern in ("assistant:breaker:*", "assistant:provider-skip:*"):
            for key in client.scan_iter(pattern):
                client.delete(key)

    wipe()
    yield
    wipe()


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        yield first, second


def chain_settings(first: FakeOpenAIServer, second: FakeOpenAIServer, **extra: object) -> dict[str, object]:
    return {
        **provider_settings(
            primary={"kind": "openai", "base_url": first.base_url, "api_key": "k1"},
            backup={"kind": "openai", "base_url": second.base_url, "api_key": "k2"},
        ),
        "MODEL": "primary:m1,backup:m2",
        **extra,
    }


@pytest.mark.parametrize(
    "failure",
    [
        error_reply(500, "boom"),
        error_reply(503, "overloaded"),
        error_reply(429, "slow down", headers={"Retry-After": "0"}),
    ],
    ids=["500", "503", "429"],
)
def test_transient_errors_are_retried_then_the_next_provider_answers(servers, failure) -> None:
    first, second = servers
    first.queue(failure, failure, failure)
    second.queue(openai_completion("from the backup"))
    with override_settings(ASSISTANT=chain_settings(first, second)):
        model = get_model()
        response = model.call_tools(HELLO, [])
        assert response.text == "from the backup"
        assert response.provider == "backup:m2"
        assert len(first.requests) == 3  # one attempt and PROVIDER_RETRIES=2 retries
        assert isinstance(model, FailoverModel)
        assert model.breaker("primary:m1").state() == "open"
        # While open, the broken provider is not even asked.
        model.call_tools(HELLO, [])
        assert len(first.requests) == 3
        assert len(second.requests) == 2


def test_a_retry_that_succeeds_keeps_the_first_provider(servers) -> None:
    first, second = servers
    first.queue(error_reply(502), openai_completion("second try"))
    with override_settings(ASSISTANT=chain_settings(first, second)):
        model = get_model()
        assert model.call_tools(HELLO, []).text == "second try"
        assert model.breaker("primary:m1").state() == "closed"
    assert second.requests == []


def test_retry_after_is_honoured(servers) -> None:
    first, second = servers
    first.queue(error_reply(429, "slow down", headers={"Retry-After": "0.6"}), openai_completion("after waiting"))
    with override_settings(ASSISTANT=chain_settings(first, second)):
        started = time.monotonic()
        assert get_model().call_tools(HELLO, []).text == "after waiting"
        assert time.monotonic() - started >= 0.6  # far above the 0.01s backoff the settings ask for


def test_a_retry_after_too_long_to_wait_fails_over_and_keeps_the_breaker_open_that_long(servers) -> None:
    first, second = servers
    first.queue(error_reply(429, "quota", headers={"Retry-After": "30"}))
    # Waiting is allowed up to 10 s, less than the 30 asked: waiting at all would show as 10 s or more.
    longest_wait = 10.0
    with override_settings(ASSISTANT=chain_settings(first, second, RETRY_AFTER_MAX_SECONDS=longest_wait)):
        model = get_model()
        started = time.monotonic()
        assert model.call_tools(HELLO, []).provider == "backup:m2"
        assert time.monotonic() - started < longest_wait  # failed over without waiting
        assert len(first.requests) == 1
        # Open for the 30 s asked, less only the time since the call began (not the 1 s cool-down).
        remaining = model.breaker("primary:m1").remaining_seconds()
        assert remaining >= 30 - (time.monotonic() - started) - 0.01


def test_a_hanging_server_times_out_and_fails_over(servers) -> None:
    first, second = servers
    hang = openai_completion("too late")
    hang.delay = 10.0  # twenty times the request timeout
    first.queue(hang, hang, hang)
    cfg = chain_settings(first, second, PROVIDER_RETRIES=1)
    with override_settings(ASSISTANT=cfg):
        started = time.monotonic()
        response = get_model().call_tools(HELLO, [])
        took = time.monotonic() - started
    assert response.provider == "backup:m2"
    assert len(first.requests) == 2
    # Both attempts waited out their 0.5 s timeout, and neither waited for the server's answer.
    assert 2 * cfg["REQUEST_TIMEOUT_SECONDS"] <= took < hang.delay


@pytest.mark.parametrize(
    ("status", "words"),
    [(401, "rejected the credentials"), (402, "needs payment"), (404, "model or endpoint was not found")],
)
def test_permanent_errors_skip_the_provider_without_retrying(servers, status, words) -> None:
    first, second = servers
    first.queue(error_reply(status, "nope"))
    with override_settings(ASSISTANT=chain_settings(first, second)):
        assert get_model().call_tools(HELLO, []).provider == "backup:m2"
        assert len(first.requests) == 1
        # Later runs (any worker: the mark is in Redis) skip it without asking.
        assert get_model().call_tools(HELLO, []).provider == "backup:m2"
        assert len(first.requests) == 1
    # A changed key is a new configuration: it is tried again.
    changed = chain_settings(first, second)
    changed["PROVIDERS"]["primary"]["api_key"] = "k1-new"  # type: ignore[index]
    with override_settings(ASSISTANT=changed):
        assert get_model().call_tools(HELLO, []).provider == "primary:m1"
    assert len(first.requests) == 2


def test_when_every_provider_fails_the_error_says_why_for_each(servers) -> None:
    first, second = servers
    first.queue(error_reply(401, "bad key"))
    second.queue(*[error_reply(500, "down")] * 3)
    with override_settings(ASSISTANT=chain_settings(first, second)), pytest.raises(AllProvidersFailedError) as caught:
        get_model().call_tools(HELLO, [])
    message = str(caught.value)
    assert message.startswith("The language model is unavailable right now")
    assert "primary:m1: the provider rejected the credentials (HTTP 401): bad key. Check OPENAI_API_KEY." in message
    assert "backup:m2: the provider had a server error (HTTP 500): down. (after 3 attempts)" in message
    assert isinstance(caught.value, ModelError)


def test_a_fallback_to_the_offline_model_ends_the_chain(servers) -> None:
    first, second = servers
    first.queue(*[error_reply(500)] * 3)
    with override_settings(ASSISTANT={**chain_settings(first, second), "MODEL": "primary:m1,offline"}):
        response = get_model().call_tools(HELLO, [])
    assert response.model == "offline-demo"
    assert response.is_demo


def test_text_already_streamed_is_not_repeated_by_a_retry(servers) -> None:
    first, second = servers
    broken = openai_stream(["Half an ans"], usage=None)
    broken.sse = broken.sse[:-2] + [(None, {"error": {"message": "stream broke"}})]
    first.queue(broken)
    deltas: list[str] = []
    with override_settings(ASSISTANT=chain_settings(first, second)), pytest.raises(ModelError, match="stream broke"):
        get_model().call_tools(HELLO, [], on_text_delta=deltas.append)
    assert deltas == ["Half an ans"]
    assert len(first.requests) == 1
    assert second.requests == []


def _worker(settings_dict: dict[str, object]) -> subprocess.Popen[str]:
    """Another worker: a fresh Python process on the same Redis with the same ASSISTANT settings.

    It starts up (Django, SDKs) at once, then waits for a line on stdin before making one model
    call, so the test decides when it calls regardless of how long start-up takes.
    """
    script = """
import json, sys
import django
django.setup()
from django.test import override_settings
from assistant.llm import get_model, Message, ModelError
with override_settings(ASSISTANT=json.loads(sys.argv[1])):
    model = get_model()
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        print("ANSWER", model.call_tools([Message.user("hi")], []).provider)
    except ModelError as error:
        print("ERROR", error)
    print("STATE", model.breaker("primary:m1").state())
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(PROJECT_DIR)}
    worker = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(settings_dict)],
        cwd=PROJECT_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return worker


def _wait_ready(worker: subprocess.Popen[str]) -> None:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line.startswith("READY"), (line, worker.stderr.read() if worker.stderr else "")


def test_another_process_sees_the_breaker_open_and_exactly_one_probe_goes_through(servers) -> None:
    first, second = servers
    cfg = chain_settings(first, second, BREAKER_COOLDOWN_SECONDS=1.5, REQUEST_TIMEOUT_SECONDS=3.0)
    cfg["MODEL"] = "primary:m1"
    observer, *probers = [_worker(cfg) for _ in range(5)]
    for worker in (observer, *probers):
        _wait_ready(worker)

    first.queue(*[error_reply(500)] * 3)
    with override_settings(ASSISTANT=cfg):
        model = get_model()
        with pytest.raises(AllProvidersFailedError):
            model.call_tools(HELLO, [])
        breaker = model.breaker("primary:m1")
        assert breaker.state() == "open"
    assert len(first.requests) == 3

    # Another worker process is refused at once, without a request to the provider.
    out, err = observer.communicate("go\n", timeout=60)
    assert observer.returncode == 0, err
    assert "primary:m1: paused after repeated failures; trying again in" in out
    assert "STATE open" in out
    assert len(first.requests) == 3

    # After the cool-down, four workers at once: exactly one probe reaches the provider.
    deadline = time.monotonic() + 5
    while breaker.state() != "half_open" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert breaker.state() == "half_open"
    slow_success = openai_completion("probe ok")
    slow_success.delay = 1.0  # the probe is still in flight while the others ask
    first.queue(slow_success)
    for worker in probers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=60) for worker in probers]
    assert all(worker.returncode == 0 for worker in probers), [e for _, e in outputs]
    answers = [o for o, _ in outputs]
    assert sum("ANSWER primary:m1" in o for o in answers) == 1, answers
    assert sum("a test request is under way" in o for o in answers) == 3, answers
    assert len(first.requests) == 4

    # The probe succeeded, so the breaker is closed for everyone.
    assert breaker.state() == "closed"
    with override_settings(ASSISTANT=cfg):
        assert get_model().call_tools(HELLO, []).provider == "primary:m1"


def test_a_failed_probe_reopens_the_breaker(servers) -> None:
    first, second = servers
    cfg = chain_settings(first, second, BREAKER_COOLDOWN_SECONDS=0.3, PROVIDER_RETRIES=0)
    first.queue(error_reply(500), error_reply(500))
    with override_settings(ASSISTANT=cfg):
        model = get_model()
        assert model.call_tools(HELLO, []).provider == "backup:m2"
        breaker = model.breaker("primary:m1")
        assert breaker.state() == "open"
        time.sleep(0.35)
        assert breaker.state() == "half_open"
        assert get_model().call_tools(HELLO, []).provider == "backup:m2"  # the probe failed
        assert breaker.state() == "open"
    assert len(first.requests) == 2


def test_unknown_spec_is_readable() -> None:
    unique = uuid.uuid4().hex[:6]
    with pytest.raises(ModelError, match="Unknown model"):
        get_model(f"nonsense{unique}")
