"""`assistant.testing`, as a host project's tests use it: a person signed in, a message over the socket, the
reply of a scripted model or of the fake OpenAI server, with nothing of this repository's test helpers;
the examples of docs/testing.md, run as written; and what the package may import."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from assistant.testing.providers import FakeOpenAIServer
from assistant.testing.scripted import write_script
from assistant.testing.sockets import connect, host_application, receive_until, settle
from tests.conftest import PROJECT_DIR, WorkerProcess

GUIDE = PROJECT_DIR / "docs" / "testing.md"
FINISHED = {"assistant.replied", "assistant.reply_failed"}


def guide_example(heading: str) -> str:
    """The first Python block under `heading` of the guide, as a reader would copy it."""
    section = GUIDE.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert match, f"no Python example under {heading!r}"
    return match.group(1)


def guide_test(heading: str, name: str) -> Callable[..., None]:
    """The test function `name` that the guide's example under `heading` defines."""
    namespace: dict[str, Any] = {"__name__": "guide_example"}
    exec(compile(guide_example(heading), f"{GUIDE.name}: {heading}", "exec"), namespace)  # noqa: S102
    return namespace[name]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_guides_first_test_passes_as_written(
    django_user_model: Any, tmp_path: Path, celery_worker: WorkerProcess
) -> None:
    guide_test("A first test", "test_the_assistant_answers")(django_user_model, tmp_path)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_guides_fake_openai_test_passes_as_written(
    django_user_model: Any, fake_openai: FakeOpenAIServer, celery_worker: WorkerProcess
) -> None:
    guide_test("The fake OpenAI server", "test_the_reply_streams_from_the_provider")(django_user_model, fake_openai)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_scripted_tool_call_and_reply_reach_the_senders_socket_alone(
    django_user_model: Any, tmp_path: Path, celery_worker: WorkerProcess
) -> None:
    ada = django_user_model.objects.create_user("ada", password="not-used")
    grace = django_user_model.objects.create_user("grace", password="not-used")
    model = write_script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "package"}}]},
        {"text": "Recorded."},
        directory=tmp_path,
    )

    mine, theirs = connect(ada), connect(grace)

    async def chat() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        await mine.send_json_to({"type": "assistant.send", "content": "record it"})
        events = await receive_until(mine, lambda event: event["type"] in FINISHED)
        elsewhere = await settle((theirs, grace), (mine, ada))
        await mine.disconnect()
        await theirs.disconnect()
        return events, elsewhere

    with override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": model}):
        events, elsewhere = asyncio.run(chat())
    assert events[-1]["type"] == "assistant.replied", events[-1]
    assert events[-1]["message"]["content"] == "Recorded."
    tools = [event["step"]["tool_name"] for event in events
             if event["type"] == "assistant.step" and event["step"]["kind"] == "tool_call"]
    assert set(tools) == {"test_record_effect"}
    assert elsewhere == [[], []]


def test_a_script_is_written_where_asked_or_in_the_temporary_folder(tmp_path: Path) -> None:
    first, second = write_script({"text": "one"}, directory=tmp_path), write_script({"text": "two"}, directory=tmp_path)
    assert first != second and first.startswith("scripted:") and second.startswith("scripted:")
    assert Path(first.removeprefix("scripted:")).parent == tmp_path
    assert json.loads(Path(second.removeprefix("scripted:")).read_text()) == [{"text": "two"}]

    by_spec = {"clerk": [{"text": "filed"}], "*": [{"text": "done"}]}
    society = Path(write_script(by_spec=by_spec).removeprefix("scripted:"))
    try:
        assert json.loads(society.read_text()) == by_spec
    finally:
        society.unlink()
    with pytest.raises(TypeError):
        write_script({"text": "one"}, by_spec={"*": []})


def stand_in_application() -> None:
    """Named by ASGI_APPLICATION below, to show the socket takes the host's application."""


def test_the_socket_is_opened_on_the_hosts_asgi_application() -> None:
    with override_settings(ASGI_APPLICATION=f"{__name__}.stand_in_application"):
        assert host_application() is stand_in_application
    assert host_application().__module__ != __name__


def test_the_package_imports_nothing_heavy_until_the_socket_module_is_asked_for() -> None:
    # A host imports the assistant in every process; channels' and asgiref's testing tools belong in tests.
    probe = ("import sys, assistant, assistant.testing, assistant.testing.scripted, assistant.testing.providers, "
             "assistant.testing.worker; "
             "print(sorted(name for name in sys.modules if name.split('.')[0] in {'channels', 'asgiref', 'django'}))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_DIR, capture_output=True, text=True,
                            check=True).stdout
    assert json.loads(loaded.replace("'", '"')) == []


def test_nothing_of_the_assistant_imports_its_testing_package() -> None:
    importers = [
        str(path.relative_to(PROJECT_DIR)) for path in (PROJECT_DIR / "assistant").rglob("*.py")
        if "testing" not in path.relative_to(PROJECT_DIR / "assistant").parts
        and re.search(r"^\s*(from|import) assistant\.testing\b|^\s*from \.+testing\b", path.read_text(), re.MULTILINE)
    ]
    assert not importers
