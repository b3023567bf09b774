"""Adapter overhead: one model call through get_model() against a fake server on loopback, versus a
raw HTTP request with the same body to the same server, measured in the same run."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from django.conf import settings
from django.test import override_settings

from assistant.llm import Message, ToolCall, get_model
from assistant.llm.openai_chat import OpenAIChatModel
from assistant.llm.remote import ProviderConfig

try:
    import httpx2 as httpx
except ImportError:  # the SDKs moved between the two names; either is the same client
    import httpx  # type: ignore[no-redef]

from assistant.testing.providers import FakeOpenAIServer
from tests.tracker_tools import TRACKER_TOOLS

ROUNDS = 300
WARMUP = 20
MESSAGES = [
    Message.system("You act as the signed-in user."),
    Message.user("create a task 'Buy milk' in Home"),
    Message.assistant("", [ToolCall("call_1", "tracker_project_list", {"search": "Home"})]),
    Message.tool("call_1", json.dumps({"status": "ok", "rows": [{"id": 7, "name": "Home"}]})),
]


def _median_ms(action: Callable[[], object]) -> float:
    for _ in range(WARMUP):
        action()
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    settings.REDIS_URL  # noqa: B018  (load settings before override_settings wraps them)
    with FakeOpenAIServer() as server:
        providers = {"bench": {"kind": "openai", "base_url": server.base_url, "api_key": "k"}}
        with override_settings(ASSISTANT={"PROVIDERS": providers, "PROVIDER_RETRIES": 0}):
            chain = get_model("bench:fake-gpt")
            adapter = OpenAIChatModel(
                ProviderConfig.from_settings("bench", "fake-gpt", providers, timeout=10, max_output_tokens=1024)
            )
            plain_body = adapter.request_body(MESSAGES, TRACKER_TOOLS, stream=False)
            stream_body = adapter.request_body(MESSAGES, TRACKER_TOOLS, stream=True)
            url = server.base_url + "/v1/chat/completions"
            headers = {"Authorization": "Bearer k"}
            with httpx.Client() as client:

                def raw(body: dict[str, object]) -> Callable[[], object]:
                    return lambda: json.loads(client.post(url, json=body, headers=headers).content)

                def raw_stream() -> None:
                    with client.stream("POST", url, json=stream_body, headers=headers) as response:
                        for line in response.iter_lines():
                            if line.startswith("data: {"):
                                json.loads(line[6:])

                figures = {
                    "raw HTTP, plain": _median_ms(raw(plain_body)),
                    "adapter, plain": _median_ms(lambda: adapter.call_tools(MESSAGES, TRACKER_TOOLS)),
                    "chain (breaker in Redis), plain": _median_ms(lambda: chain.call_tools(MESSAGES, TRACKER_TOOLS)),
                    "raw HTTP, streamed": _median_ms(raw_stream),
                    "adapter, streamed": _median_ms(
                        lambda: adapter.call_tools(MESSAGES, TRACKER_TOOLS, on_text_delta=lambda _: None)
                    ),
                }
    print(f"median of {ROUNDS} calls, {len(TRACKER_TOOLS)} tools, {len(json.dumps(plain_body))} byte body")
    for name, value in figures.items():
        print(f"  {name:36s} {value:7.3f} ms")
    for mode in ("plain", "streamed"):
        base, adapted = figures[f"raw HTTP, {mode}"], figures[f"adapter, {mode}"]
        print(f"  adapter overhead, {mode:9s} +{adapted - base:6.3f} ms  (x{adapted / base:.2f} of raw)")
    base, chained = figures["adapter, plain"], figures["chain (breaker in Redis), plain"]
    print(f"  failover + breaker on top of adapter +{chained - base:6.3f} ms  (x{chained / base:.2f})")
