"""Files the person attaches: taken only within the limits and as what their content says they are, stored for their
person alone, sent with one message through the real socket, read by the model as data, and gone with their chat.
A refused file leaves nothing behind; another person's file is as missing everywhere."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from assistant.models import AgentAttachment, AgentMessage
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with

pytestmark = pytest.mark.django_db(transaction=True)

CSV = b"title,priority\nBuy milk,2\nFix the fence,3\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
UPLOAD = "assistant:attachments"


def _client(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _upload(client: Client, name: str, body: bytes, content_type: str = "application/octet-stream") -> Any:
    return client.post(reverse(UPLOAD), {"file": SimpleUploadedFile(name, body, content_type=content_type)})


def _stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT) / "assistant" / "attachments"
    return sorted(path for path in root.rglob("*") if path.is_file()) if root.exists() else []


def test_a_file_is_taken_as_what_its_content_says_and_given_back_to_its_person_alone(alice: Any, bob: Any) -> None:
    before = _stored_files()
    answer = _upload(_client(alice), "tasks.csv", CSV, "text/csv")
    assert answer.status_code == 201, answer.content
    attachment = answer.json()["attachment"]
    assert {key: attachment[key] for key in ("name", "content_type", "size")} == {
        "name": "tasks.csv", "content_type": "text/csv", "size": len(CSV)}
    assert len(_stored_files()) == len(before) + 1

    mine = _client(alice).get(attachment["url"])
    assert mine.status_code == 200 and b"".join(mine.streaming_content) == CSV
    assert mine["X-Content-Type-Options"] == "nosniff" and "attachment" in mine["Content-Disposition"]
    # Anyone else: as missing as a file that never was.
    assert _client(bob).get(attachment["url"]).status_code == 404
    assert Client().get(attachment["url"]).status_code == 302  # to sign in

    # An HTML file is kept as text, and comes back as text to download, never as a page of the site.
    page = _upload(_client(alice), "notes.html", b"<script>alert(1)</script><p>hi</p>", "text/html").json()
    assert page["attachment"]["content_type"] == "text/html"
    served = _client(alice).get(page["attachment"]["url"])
    assert served["Content-Type"].startswith("text/plain") and "attachment" in served["Content-Disposition"]
    # A picture opens in the browser, as a picture.
    picture = _upload(_client(alice), "photo.png", PNG, "image/png").json()["attachment"]
    shown = _client(alice).get(picture["url"])
    assert shown["Content-Type"] == "image/png" and "inline" in shown["Content-Disposition"]


@pytest.mark.parametrize(("name", "body", "status", "code"), [
    ("big.csv", b"a," * (1024 * 8), 413, "too_large"),
    ("program.exe", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00", 415, "unsupported_type"),
    ("photo.png", b"not a picture at all", 415, "unsupported_type"),
    ("empty.txt", b"", 400, "empty_file"),
])
def test_a_file_too_large_or_of_a_type_not_taken_is_refused_in_words_and_nothing_is_stored(
    alice: Any, name: str, body: bytes, status: int, code: str
) -> None:
    before = _stored_files()
    with assistant_settings_with(ATTACHMENT_MAX_BYTES=4096):
        answer = _upload(_client(alice), name, body)
    assert answer.status_code == status and answer.json()["error"] == code, answer.content
    assert answer.json()["message"]
    assert not AgentAttachment.objects.exists() and _stored_files() == before


def test_an_upload_needs_a_signed_in_person_the_sites_csrf_check_and_a_file(alice: Any) -> None:
    anonymous = Client().post(reverse(UPLOAD), {"file": SimpleUploadedFile("a.txt", b"hello")})
    assert anonymous.status_code == 403 and anonymous.json()["error"] == "not_signed_in"
    forged = _upload(_client(alice, csrf=True), "a.txt", b"hello")
    assert forged.status_code == 403
    nothing = _client(alice).post(reverse(UPLOAD), {})
    assert nothing.status_code == 400 and nothing.json()["error"] == "no_file"
    assert not AgentAttachment.objects.exists()


@pytest.mark.worker
def test_a_sent_file_is_read_by_the_model_as_data_shown_in_the_thread_and_gone_with_its_chat(
    alice: Any, bob: Any, user_factory: Callable[..., Any], celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["Two tasks in it."]))
    mine = _upload(_client(alice), "tasks.csv", CSV, "text/csv").json()["attachment"]
    theirs = _upload(_client(bob), "theirs.txt", b"bob's", "text/plain").json()["attachment"]
    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        seen: dict[str, Any] = {}
        await tab.send_json_to({"type": "assistant.send", "content": "", "attachments": [theirs["id"]],
                                "request_id": "stolen"})
        seen["stolen"] = (await receive_until(tab, lambda e: e["type"] == "assistant.error", timeout=10))[-1]
        await tab.send_json_to({"type": "assistant.send", "content": "what is in this?", "attachments": [mine["id"]]})
        events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.error"}, timeout=30)
        seen["sent"], seen["replied"] = events[0], events[-1]
        await tab.send_json_to({"type": "assistant.send", "content": "again", "attachments": [mine["id"]],
                                "chat_id": events[0]["chat_id"], "request_id": "twice"})
        seen["twice"] = (await receive_until(tab, lambda e: e["type"] == "assistant.error", timeout=10))[-1]
        await tab.send_json_to({"type": "assistant.load", "request_id": "load"})
        seen["loaded"] = (await receive_until(tab, lambda e: e.get("request_id") == "load", timeout=10))[-1]
        await tab.send_json_to({"type": "assistant.chat_delete", "chat_id": events[0]["chat_id"]})
        await receive_until(tab, lambda e: e["type"] == "assistant.chat_deleted", timeout=10)
        await tab.disconnect()
        return seen

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        seen = asyncio.run(scenario())

    assert seen["stolen"]["code"] == "not_found" and seen["twice"]["code"] == "not_found"
    assert seen["sent"]["message"]["attachments"] == [mine]
    assert seen["replied"]["message"]["content"] == "Two tasks in it."
    # The model read the file after the person's words, as delimited data, its content whole.
    asked = [m["content"] for m in fake_openai.bodies[-1]["messages"] if m["role"] == "user"][-1]
    words, block = asked.split("\n\n", 1)
    assert words == "what is in this?"
    lines = block.splitlines()
    assert (lines[0], lines[-1]) == ("<attachments>", "</attachments>")
    [described] = json.loads(lines[2])
    assert described == {"id": mine["id"], "name": "tasks.csv", "type": "text/csv", "size": f"{len(CSV)} bytes",
                         "from": "the person", "content": CSV.decode()}
    [question] = [m for m in seen["loaded"]["messages"] if m["role"] == "user"]
    assert question["attachments"] == [mine]

    # Deleted with its chat: its content is gone and it is no longer served; staff keep its name and size.
    kept = AgentAttachment.objects.get(pk=mine["id"])
    assert kept.removed_at is not None and not kept.file
    assert _client(alice).get(mine["url"]).status_code == 404
    assert AgentMessage.objects.filter(attachments=kept).exists()
    # Staff see on the run's page what was sent with its question, and that its content went with the chat.
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    page = staff.get(reverse("admin:assistant_agentrun_change", args=[seen["sent"]["run_id"]])).content.decode()
    shown = " ".join(re.sub(r"<[^>]+>", "", unescape(page)).split())  # the page's text, as staff read it
    assert "With 1 file: tasks.csv (text/csv, 42 bytes; its content deleted" in shown


@pytest.mark.worker
def test_a_picture_goes_to_a_provider_that_takes_pictures_as_an_image_part_beside_the_words(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["A small picture."]))
    picture = _upload(_client(alice), "photo.png", PNG, "image/png").json()["attachment"]
    tab = connect(alice)

    async def scenario() -> None:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "what is this?", "attachments": [picture["id"]]})
        await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"}, timeout=30)
        await tab.disconnect()

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        asyncio.run(scenario())

    [asked] = [m["content"] for m in fake_openai.bodies[-1]["messages"] if m["role"] == "user"][-1:]
    words, image = asked
    assert words["type"] == "text" and words["text"].startswith("what is this?\n\n<attachments>")
    assert "a picture: shown beside this message" in words["text"]
    assert image == {"type": "image_url",
                     "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}


@pytest.mark.worker
def test_an_edit_takes_the_files_its_message_was_sent_with_that_the_person_keeps_and_no_others(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["Two tasks in it."]), openai_stream(["One picture, two tasks."]),
                      openai_stream(["Just the list."]))
    csv = _upload(_client(alice), "tasks.csv", CSV, "text/csv").json()["attachment"]
    picture = _upload(_client(alice), "photo.png", PNG, "image/png").json()["attachment"]
    bobs = _upload(_client(bob), "theirs.txt", b"bob's", "text/plain").json()["attachment"]
    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        seen: dict[str, Any] = {}
        await tab.send_json_to({"type": "assistant.send", "content": "what is in these?",
                                "attachments": [csv["id"], picture["id"]]})
        events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.error"}, timeout=30)
        first = events[0]["message"]
        # The edit keeps both: each goes again, as the new message's own.
        await tab.send_json_to({"type": "assistant.send", "content": "and now?", "edit_of": first["id"],
                                "attachments": [csv["id"], picture["id"]], "request_id": "both"})
        events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.error"}, timeout=30)
        seen["both"] = events[0]
        # Another person's file, or a file of another of one's messages, is not the edited message's to take.
        for request, ids in (("bobs", [bobs["id"]]), ("other", [events[0]["message"]["attachments"][0]["id"]])):
            await tab.send_json_to({"type": "assistant.send", "content": "x", "edit_of": first["id"],
                                    "attachments": ids, "request_id": request})
            seen[request] = (await receive_until(tab, lambda e: e["type"] == "assistant.error", timeout=10))[-1]
        # The person left the picture out.
        await tab.send_json_to({"type": "assistant.send", "content": "only the list", "edit_of": first["id"],
                                "attachments": [csv["id"]], "request_id": "one"})
        events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.error"}, timeout=30)
        seen["one"] = events[0]
        await tab.disconnect()
        seen["first"] = first
        return seen

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        seen = asyncio.run(scenario())

    assert seen["bobs"]["code"] == "not_found" and seen["other"]["code"] == "not_found"
    both = seen["both"]["message"]["attachments"]
    assert [(file["name"], file["size"]) for file in both] == [("tasks.csv", len(CSV)), ("photo.png", len(PNG))]
    assert not {file["id"] for file in both} & {csv["id"], picture["id"]}  # copies, the new message's
    assert seen["first"]["attachments"] == [csv, picture]  # the edited message keeps its own
    # Each copy is its person's to open, with the same content.
    assert _client(alice).get(both[0]["url"]).getvalue() == CSV
    assert _client(bob).get(both[0]["url"]).status_code == 404
    # The model read the edit's files as it read the first message's: the CSV as data, the picture as a part.
    edit_body = fake_openai.bodies[1]
    [words, image] = [m["content"] for m in edit_body["messages"] if m["role"] == "user"][-1]
    assert words["text"].startswith("and now?\n\n<attachments>") and "Buy milk" in words["text"]
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    # The last edit has the list alone.
    assert [file["name"] for file in seen["one"]["message"]["attachments"]] == ["tasks.csv"]
    asked = [m["content"] for m in fake_openai.bodies[-1]["messages"] if m["role"] == "user"][-1]
    assert isinstance(asked, str) and asked.startswith("only the list\n\n<attachments>")
    # Each of alice's five files (two sent, three copies) has its own stored content: removing one leaves the rest.
    names = [row.file.name for row in AgentAttachment.objects.filter(owner=alice)]
    assert len(set(names)) == 5 and all(row.file.storage.exists(name) for row, name in
                                         zip(AgentAttachment.objects.filter(owner=alice), names, strict=True))
