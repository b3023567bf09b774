"""Dictation in Chromium with a fake microphone (a WAV file played as the microphone's sound), through daphne, against
the fake transcription server speaking the protocol over HTTP: the microphone beside Send records, stops when
pressed again (or at the limit; closing the dock drops it), and what the server heard lands in the message box at
the cursor, unsent, with focus back there. Without a transcription model there is no microphone; a blocked
microphone, a browser that cannot record and a failing server are each said in words, and the panel goes on
working. Axe finds nothing serious while recording or after."""

from __future__ import annotations

import math
import struct
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentMessage
from assistant.testing.providers import FakeTranscriptionServer, error_reply
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, log_in, screenshot
from tests.conftest import daphne_on_test_database

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
DOCK = "#assistant-dock"
SAID = "water the plants on Friday"
EBML = b"\x1a\x45\xdf\xa3"  # the first bytes of a WebM file


@pytest.fixture(scope="module")
def microphone_sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seconds of a 440 Hz tone as 16-bit mono PCM: what the fake microphone hears, over and over."""
    path = tmp_path_factory.mktemp("microphone") / "tone.wav"
    rate = 48_000
    with wave.open(str(path), "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * 440 * n / rate)))
                                   for n in range(3 * rate)))
    return path


@pytest.fixture(scope="module")
def chromium_args(microphone_sound: Path) -> tuple[str, ...]:
    # A fake microphone playing the file; whether the page may use it is each test's context's permission.
    return ("--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={microphone_sound}")


@pytest.fixture(scope="module")
def transcription_server() -> Iterator[FakeTranscriptionServer]:
    with FakeTranscriptionServer() as server:
        yield server


@pytest.fixture
def heard(transcription_server: FakeTranscriptionServer) -> FakeTranscriptionServer:
    """The fake server, with nothing received yet; it answers SAID unless a test queues otherwise."""
    from assistant.infra.redis_connection import redis_client

    for key in redis_client().scan_iter("assistant:dictations:*"):
        redis_client().delete(key)
    transcription_server.reset()
    transcription_server.text = SAID
    return transcription_server


def _site(django_db_blocker: Any, site_model: str, env: dict[str, str]) -> Any:
    return daphne_on_test_database(django_db_blocker, env={"ASSISTANT_MODEL": site_model, **env})


@pytest.fixture(scope="module")
def site_url(
    django_db_setup: None, django_db_blocker: Any, site_model: str, transcription_server: FakeTranscriptionServer
) -> Iterator[str]:
    """daphne with dictation through the fake server, as the `openai` provider reaches it."""
    env = {"ASSISTANT_TRANSCRIPTION_MODEL": "openai:whisper-1", "OPENAI_BASE_URL": transcription_server.base_url,
           "OPENAI_API_KEY": "test-key"}
    with _site(django_db_blocker, site_model, env) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def short_site_url(
    django_db_setup: None, django_db_blocker: Any, site_model: str, transcription_server: FakeTranscriptionServer
) -> Iterator[str]:
    """The same, with recordings of at most two seconds."""
    env = {"ASSISTANT_TRANSCRIPTION_MODEL": "openai:whisper-1", "OPENAI_BASE_URL": transcription_server.base_url,
           "OPENAI_API_KEY": "test-key", "ASSISTANT_DICTATION_MAX_SECONDS": "2"}
    with _site(django_db_blocker, site_model, env) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def plain_site_url(django_db_setup: None, django_db_blocker: Any, site_model: str) -> Iterator[str]:
    """daphne with no transcription model configured."""
    with _site(django_db_blocker, site_model, {}) as port:
        yield f"http://127.0.0.1:{port}"


def open_panel(page: Any, site_url: str, *, microphone: bool = True) -> Any:
    """Alice on the assistant's page, its socket connected; the microphone allowed unless told otherwise."""
    if microphone:
        page.context.grant_permissions(["microphone"], origin=site_url)
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    return page.locator(CONV)


def assert_axe_clean(page: Any, selector: str) -> None:
    violations = axe_violations(page, selector)
    assert not violations, describe_violations(violations)


def test_what_the_server_heard_lands_in_the_message_box_at_the_cursor_unsent(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    conversation = open_panel(page, site_url)
    box = conversation.locator("[data-assistant-input]")
    box.fill("Remind me to  please")
    box.evaluate("box => box.setSelectionRange(13, 13)")  # between "to" and "please"
    microphone = conversation.get_by_role("button", name="Dictate")
    expect(microphone).to_have_attribute("aria-pressed", "false")

    microphone.click()

    stop = conversation.get_by_role("button", name="Stop recording")
    expect(stop).to_have_attribute("aria-pressed", "true")
    expect(stop).to_have_class("assistant-dictate is-recording")
    # The time recorded shows on the button, and grows.
    expect(stop.locator("[data-assistant-dictate-time]")).to_have_text("0:01")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert_axe_clean(page, CONV)
    screenshot(conversation.locator(".assistant-chatbar"), "dictation-recording")
    stop.click()

    expect(box).to_have_value(f"Remind me to {SAID} please")
    expect(box).to_be_focused()
    # The cursor stands right after the words it put in.
    assert box.evaluate("box => [box.selectionStart, box.selectionEnd]") == [len(f"Remind me to {SAID}")] * 2
    expect(conversation.locator("[data-assistant-announce]")).to_have_text(f"Added to your message: {SAID}")
    expect(conversation.get_by_role("button", name="Dictate")).to_have_attribute("aria-pressed", "false")
    [received] = heard.requests
    recording = received.body["file"]
    assert received.body["model"] == "whisper-1"
    assert recording.filename == "recording.webm" and recording.data.startswith(EBML)
    # Checked by the person before it goes anywhere: nothing was sent to the assistant.
    assert conversation.locator(".assistant-message.is-user").count() == 0
    assert not AgentMessage.objects.exists()
    assert_axe_clean(page, CONV)


def test_the_dock_dictates_from_the_keyboard(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    page.context.grant_permissions(["microphone"], origin=site_url)
    log_in(page, site_url, "alice")
    page.keyboard.press("Alt+Shift+A")
    dock = page.locator(DOCK)
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    box = dock.locator("[data-assistant-input]")
    box.focus()
    page.keyboard.press("Tab")  # the microphone comes next, before Send
    microphone = dock.get_by_role("button", name="Dictate")
    expect(microphone).to_be_focused()
    screenshot(dock.locator(".assistant-chatbar"), "dictation-dock")

    page.keyboard.press("Enter")
    stop = dock.get_by_role("button", name="Stop recording")
    expect(stop.locator("[data-assistant-dictate-time]")).to_have_text("0:01")
    expect(stop).to_be_focused()
    page.keyboard.press("Space")

    expect(box).to_have_value(SAID)
    expect(box).to_be_focused()
    assert_axe_clean(page, DOCK)


def test_closing_the_dock_drops_a_recording_under_way(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    page.context.grant_permissions(["microphone"], origin=site_url)
    log_in(page, site_url, "alice")
    page.keyboard.press("Alt+Shift+A")
    dock = page.locator(DOCK)
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    dock.get_by_role("button", name="Dictate").click()
    expect(dock.locator("[data-assistant-dictate-time]")).to_have_text("0:01")

    page.keyboard.press("Escape")
    expect(dock).to_be_hidden()
    page.keyboard.press("Alt+Shift+A")

    # Back to its first state, with nothing sent and nothing put in the message box.
    microphone = dock.get_by_role("button", name="Dictate")
    expect(microphone).to_have_attribute("aria-pressed", "false")
    expect(microphone.locator("[data-assistant-dictate-time]")).to_be_hidden()
    expect(dock.locator("[data-assistant-input]")).to_have_value("")
    assert heard.requests == []


def test_a_recording_stops_by_itself_at_the_limit(
    page: Any, short_site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    conversation = open_panel(page, short_site_url)

    conversation.get_by_role("button", name="Dictate").click()

    # Nobody presses Stop: at two seconds the recording ends and goes to the server.
    expect(conversation.locator("[data-assistant-input]")).to_have_value(SAID)
    expect(conversation.locator("[data-assistant-announce]")).to_have_text(
        f"The recording stopped at its limit of 2 seconds. Added to your message: {SAID}")
    assert len(heard.requests) == 1


def test_without_a_transcription_model_there_is_no_microphone(page: Any, plain_site_url: str, alice: Any) -> None:
    conversation = open_panel(page, plain_site_url)
    page.goto(plain_site_url + "/")
    page.keyboard.press("Alt+Shift+A")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")

    assert page.locator("[data-assistant-dictate]").count() == 0
    expect(conversation.locator("[data-assistant-send]")).to_be_visible()
    assert_axe_clean(page, DOCK)


def test_a_blocked_microphone_is_explained_and_the_panel_works_on(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    conversation = open_panel(page, site_url, microphone=False)

    conversation.get_by_role("button", name="Dictate").click()

    status = conversation.locator("[data-assistant-status]")
    expect(status).to_have_text("The microphone is blocked for this site. Allow it in the browser's site settings to "
                                "dictate, or type your message.")
    expect(status).to_have_class("assistant-status is-error")
    expect(conversation.get_by_role("button", name="Dictate")).to_have_attribute("aria-pressed", "false")
    conversation.locator("[data-assistant-input]").fill("typed instead")
    expect(conversation.locator("[data-assistant-send]")).to_be_enabled()
    assert heard.requests == []
    assert_axe_clean(page, CONV)


def test_a_browser_that_cannot_record_says_so(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    page.add_init_script("delete window.MediaRecorder")
    conversation = open_panel(page, site_url)

    conversation.get_by_role("button", name="Dictate").click()

    expect(conversation.locator("[data-assistant-status]")).to_have_text(
        "This browser cannot record audio here, so dictation is not available. Type your message instead.")
    assert heard.requests == []


def test_a_failing_server_is_said_in_words_and_the_next_dictation_works(
    page: Any, site_url: str, alice: Any, heard: FakeTranscriptionServer
) -> None:
    heard.queue(error_reply(500, "the model crashed"))
    conversation = open_panel(page, site_url)
    status = conversation.locator("[data-assistant-status]")
    microphone = conversation.get_by_role("button", name="Dictate")

    microphone.click()
    expect(conversation.locator("[data-assistant-dictate-time]")).to_have_text("0:01")
    conversation.get_by_role("button", name="Stop recording").click()

    expect(status).to_have_text("Dictation is unavailable right now. Type your message instead, or try again in a "
                                "minute.")
    expect(conversation.locator("[data-assistant-input]")).to_have_value("")

    # The next try puts the connection's state back in the status line, and its text lands.
    microphone.click()
    expect(status).to_have_text("Connected")
    expect(conversation.locator("[data-assistant-dictate-time]")).to_have_text("0:01")
    conversation.get_by_role("button", name="Stop recording").click()
    expect(conversation.locator("[data-assistant-input]")).to_have_value(SAID)
    assert len(heard.requests) == 2
