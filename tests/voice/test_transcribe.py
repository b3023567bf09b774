"""Dictation's endpoint, `POST /assistant/transcribe/`: a signed-in person's recording goes to the transcription
server (the fake one, speaking the protocol over HTTP), its text comes back; everything else is refused in words
before the server hears of it, and nothing of a recording is kept."""

from __future__ import annotations

import io
import logging
import math
import re
import struct
import wave
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.checks import run_checks
from django.test import Client, override_settings
from django.urls import reverse

from assistant.infra.redis_connection import redis_client
from assistant.testing.providers import FakeTranscriptionServer, FormFile, Reply, error_reply, transcription_reply

pytestmark = pytest.mark.django_db

URL = "/assistant/transcribe/"
SAID = "Add a task to buy milk tomorrow"


def wav_recording(seconds: float = 0.5, rate: int = 16_000) -> bytes:
    """A short WAV of a 440 Hz tone: a real recording, though nobody speaks in it."""
    frames = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * n / rate)))
                      for n in range(int(seconds * rate)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(rate)
        recording.writeframes(frames)
    return buffer.getvalue()


def upload(data: bytes, content_type: str = "audio/wav", name: str = "recording") -> dict[str, Any]:
    file = io.BytesIO(data)
    file.name = name
    file.content_type = content_type  # type: ignore[attr-defined]  # the test client sends it as the part's type
    return {"audio": file}


def signed_in(user: Any, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


def rows() -> dict[str, int]:
    """How many rows each of the assistant's tables holds."""
    return {model.__name__: model.objects.count() for model in apps.get_app_config("assistant").get_models()}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeTranscriptionServer]:
    with FakeTranscriptionServer() as running:
        yield running


@pytest.fixture
def dictation(server: FakeTranscriptionServer) -> Iterator[FakeTranscriptionServer]:
    """The site with dictation through the fake server (the `openai` provider's base URL, as OPENAI_BASE_URL sets
    it), each person's count of dictations this minute forgotten."""
    for key in redis_client().scan_iter("assistant:dictations:*"):
        redis_client().delete(key)
    server.reset()
    providers = {**settings.ASSISTANT["PROVIDERS"], "openai": {"api_key": "test-key", "base_url": server.base_url}}
    with override_settings(ASSISTANT={**settings.ASSISTANT, "TRANSCRIPTION_MODEL": "openai:whisper-1",
                                      "PROVIDERS": providers, "REQUEST_TIMEOUT_SECONDS": 0.5}):
        yield server


def with_settings(**changes: Any) -> Any:
    from assistant.conf import assistant_settings

    current = {key: getattr(assistant_settings, key) for key in ("TRANSCRIPTION_MODEL", "PROVIDERS",
                                                                 "REQUEST_TIMEOUT_SECONDS")}
    return override_settings(ASSISTANT={**settings.ASSISTANT, **current, **changes})


def test_a_recording_comes_back_as_the_text_the_server_heard_and_nothing_is_kept(
    dictation: FakeTranscriptionServer, alice: Any
) -> None:
    recording = wav_recording()
    dictation.queue(transcription_reply(f"  {SAID}\n"))
    before = rows()

    response = signed_in(alice).post(URL, upload(recording, "audio/wav"))

    assert response.status_code == 200, response.content
    assert response.json() == {"text": SAID}
    [received] = dictation.requests
    assert received.path == "/v1/audio/transcriptions"
    assert received.headers["authorization"] == "Bearer test-key"
    assert received.body["model"] == "whisper-1"
    assert received.body["response_format"] == "json"
    assert received.body["file"] == FormFile("recording.wav", "audio/wav", recording)
    assert rows() == before


def test_the_container_is_told_by_the_recordings_bytes_and_named_for_the_server(
    dictation: FakeTranscriptionServer, alice: Any
) -> None:
    # What browsers record: WebM (Chromium, Firefox), Ogg, MP4 (Safari), each as its container's first bytes say,
    # whatever type the browser declared.
    recordings = {
        ("recording.webm", "audio/webm"): (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01" + bytes(200), "video/webm"),
        ("recording.ogg", "audio/ogg"): (b"OggS\x00\x02" + bytes(200), "audio/ogg;codecs=opus"),
        ("recording.mp4", "audio/mp4"): (b"\x00\x00\x00\x1cftypM4A " + bytes(200), "audio/x-m4a"),
        ("recording.mp3", "audio/mpeg"): (b"ID3\x04\x00" + bytes(200), "application/octet-stream"),
    }
    client = signed_in(alice)
    for data, content_type in recordings.values():
        assert client.post(URL, upload(data, content_type)).status_code == 200

    assert [(request.body["file"].filename, request.body["file"].content_type)
            for request in dictation.requests] == list(recordings)


def test_the_panel_offers_the_microphone_with_its_limits_and_its_token_works(
    dictation: FakeTranscriptionServer, alice: Any
) -> None:
    client = signed_in(alice, enforce_csrf_checks=True)
    with with_settings(DICTATION_MAX_SECONDS=45, DICTATION_MAX_BYTES=2_000_000):
        page = client.get(reverse("assistant:page")).content.decode()
        dock = client.get("/").content.decode()  # a page of the site, with the dock

    for html in (page, dock):
        [button] = re.findall(r"<button[^>]*data-assistant-dictate[^>]*>", html)
        assert f'data-url="{URL}"' in button
        assert 'data-max-seconds="45"' in button and 'data-max-bytes="2000000"' in button
        assert 'aria-pressed="false"' in button
        assert "assistant/dictation.js" in html
    token = re.search(r'data-csrf-token="([^"]+)"', page)
    assert token

    response = client.post(URL, upload(wav_recording()), headers={"X-CSRFToken": token.group(1)})

    assert response.status_code == 200, response.content
    assert response.json() == {"text": dictation.text}


def test_a_post_without_the_csrf_token_is_refused_in_words(dictation: FakeTranscriptionServer, alice: Any) -> None:
    response = signed_in(alice, enforce_csrf_checks=True).post(URL, upload(wav_recording()))

    assert response.status_code == 403
    assert "Reload the page" in response.json()["error"]
    assert dictation.requests == []


def test_without_a_transcription_model_there_is_no_microphone_and_no_dictation(
    server: FakeTranscriptionServer, alice: Any
) -> None:
    server.reset()
    client = signed_in(alice)
    with with_settings(TRANSCRIPTION_MODEL=None):
        page = client.get(reverse("assistant:page")).content.decode()
        dock = client.get("/").content.decode()
        response = client.post(URL, upload(wav_recording()))

    assert "data-assistant-conversation" in page and "data-assistant-conversation" in dock
    assert "data-assistant-dictate" not in page and "data-assistant-dictate" not in dock
    assert response.status_code == 404
    assert response.json() == {"error": "Dictation is not available on this site."}
    assert server.requests == []


def test_only_a_signed_in_person_may_dictate(dictation: FakeTranscriptionServer) -> None:
    response = Client().post(URL, upload(wav_recording()))

    assert response.status_code == 403
    assert response.json() == {"error": "Sign in to use dictation."}
    assert dictation.requests == []


def test_dictation_is_posted(dictation: FakeTranscriptionServer, alice: Any) -> None:
    assert signed_in(alice).get(URL).status_code == 405


@pytest.mark.parametrize("size", [1_500, 60_000], ids=["past the limit", "announced past the limit"])
def test_a_recording_past_the_size_limit_is_refused_unread(
    dictation: FakeTranscriptionServer, alice: Any, size: int
) -> None:
    # 1,500 bytes fit the request's allowance for the form around the file, so its upload is stopped as it passes
    # the limit; 60,000 are refused for the length the request announces, before its body is read.
    recording = wav_recording(seconds=1)[:size]
    before = rows()

    with with_settings(DICTATION_MAX_BYTES=1_000):
        response = signed_in(alice).post(URL, upload(recording))

    assert response.status_code == 413
    assert response.json() == {"error": "The recording is too large: at most 1 kB. Record a shorter message."}
    assert dictation.requests == []
    assert rows() == before


def test_a_form_whose_other_fields_are_too_large_is_refused_as_too_large(
    dictation: FakeTranscriptionServer, alice: Any
) -> None:
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000):
        response = signed_in(alice).post(URL, {**upload(wav_recording(seconds=0.01)), "note": "x" * 2_000})

    assert response.status_code == 413
    assert response.json()["error"].startswith("The recording is too large")
    assert dictation.requests == []


@pytest.mark.parametrize(("data", "content_type"), [
    (b"Buy milk tomorrow, please", "audio/webm"),              # text that says it is audio
    (b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),           # a picture
    (wav_recording(), "text/plain"),                          # audio declared as something else
], ids=["text said to be audio", "an image", "audio said to be text"])
def test_what_is_not_a_recording_is_refused(
    dictation: FakeTranscriptionServer, alice: Any, data: bytes, content_type: str
) -> None:
    response = signed_in(alice).post(URL, upload(data, content_type))

    assert response.status_code == 415
    assert response.json()["error"].startswith("That is not a recording dictation can read")
    assert dictation.requests == []


def test_a_request_without_a_recording_says_what_to_send(dictation: FakeTranscriptionServer, alice: Any) -> None:
    client = signed_in(alice)
    missing = client.post(URL, {"sound": "nothing"})
    empty = client.post(URL, upload(b""))
    as_json = client.post(URL, b'{"audio": "..."}', content_type="application/json")

    assert (missing.status_code, empty.status_code, as_json.status_code) == (400, 400, 400)
    assert "the field `audio` of a multipart form" in missing.json()["error"]
    assert empty.json() == {"error": "The recording is empty. Record again."}
    assert dictation.requests == []


def test_each_person_has_a_limit_a_minute(dictation: FakeTranscriptionServer, alice: Any, bob: Any) -> None:
    with with_settings(DICTATIONS_PER_MINUTE=2):
        answers = [signed_in(alice).post(URL, upload(wav_recording())) for _ in range(3)]
        bobs = signed_in(bob).post(URL, upload(wav_recording()))

    assert [answer.status_code for answer in answers] == [200, 200, 429]
    refused = answers[-1]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["error"] == (f"That is the most dictation this site allows in a minute (2). "
                                       f"Try again in {refused['Retry-After']} seconds, or type your message.")
    assert bobs.status_code == 200
    assert len(dictation.requests) == 3


@pytest.mark.parametrize(("reply", "logged"), [
    (error_reply(500, "the model crashed"), "server error (HTTP 500): the model crashed"),
    (error_reply(401, "bad key"), "rejected the credentials (HTTP 401)"),
    (Reply(json={"text": "late"}, delay=2.0), "no answer within 0.5s"),
    (Reply(json={"transcript": "not the protocol"}), "answered without a text"),
], ids=["a server error", "refused credentials", "no answer in time", "an answer without text"])
def test_a_failing_transcription_server_is_unavailable_in_words_and_a_warning(
    dictation: FakeTranscriptionServer, alice: Any, caplog: pytest.LogCaptureFixture, reply: Reply, logged: str
) -> None:
    dictation.queue(reply)
    with caplog.at_level(logging.WARNING, logger="assistant.voice"):
        response = signed_in(alice).post(URL, upload(wav_recording()))

    assert response.status_code == 503
    assert response.json() == {
        "error": "Dictation is unavailable right now. Type your message instead, or try again in a minute."}
    [warning] = [record for record in caplog.records if record.name.startswith("assistant.voice")]
    assert warning.levelno == logging.WARNING
    assert logged in warning.getMessage()
    assert len(dictation.requests) == 1


def test_a_server_that_cannot_be_reached_is_unavailable(
    dictation: FakeTranscriptionServer, alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeTranscriptionServer() as gone:
        address = gone.base_url
    with with_settings(PROVIDERS={"openai": {"api_key": "test-key", "base_url": address}}), \
            caplog.at_level(logging.WARNING, logger="assistant.voice"):
        response = signed_in(alice).post(URL, upload(wav_recording()))

    assert response.status_code == 503
    assert "could not connect" in caplog.text


def test_a_recording_the_server_refuses_is_said_to_be_unreadable(
    dictation: FakeTranscriptionServer, alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dictation.queue(error_reply(400, "Audio file might be corrupted or unsupported"))
    with caplog.at_level(logging.WARNING, logger="assistant.voice"):
        response = signed_in(alice).post(URL, upload(wav_recording()))

    assert response.status_code == 422
    assert response.json() == {"error": "The recording could not be transcribed. Try recording again, or type "
                                        "your message."}
    assert "Audio file might be corrupted" in caplog.text


@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-5", "whisper-1", "nowhere:whisper-1"])
def test_an_unusable_transcription_model_is_a_check_error_and_unavailable_when_used(
    dictation: FakeTranscriptionServer, alice: Any, model: str, caplog: pytest.LogCaptureFixture
) -> None:
    with with_settings(TRANSCRIPTION_MODEL=model):
        errors = [message for message in run_checks() if message.id == "assistant.E006"]
        with caplog.at_level(logging.WARNING, logger="assistant.voice"):
            response = signed_in(alice).post(URL, upload(wav_recording()))

    [error] = errors
    assert repr(model) in error.msg and "openai:whisper-1" in (error.hint or "")
    assert response.status_code == 503
    assert "cannot be used" in caplog.text
    assert dictation.requests == []


def test_the_check_asks_for_whole_limits_and_is_quiet_when_all_is_well(dictation: FakeTranscriptionServer) -> None:
    assert [message for message in run_checks() if message.id == "assistant.E006"] == []
    with with_settings(DICTATION_MAX_SECONDS=0, DICTATION_MAX_BYTES="4 MB"):
        errors = [message.msg for message in run_checks() if message.id == "assistant.E006"]

    assert errors == ["ASSISTANT['DICTATION_MAX_SECONDS'] = 0 is not a whole number of at least 1.",
                      "ASSISTANT['DICTATION_MAX_BYTES'] = '4 MB' is not a whole number of at least 1."]


BOUNDARY = "odd-boundary"


def multipart(*parts: tuple[bytes, bytes]) -> bytes:
    """A multipart/form-data body of raw (part headers, data) pairs, as any client could send it."""
    body = b"".join(b"--" + BOUNDARY.encode() + b"\r\n" + head + b"\r\n\r\n" + data + b"\r\n" for head, data in parts)
    return body + b"--" + BOUNDARY.encode() + b"--\r\n"


def audio_part(filename: bytes = b"recording.wav", content_type: bytes = b"audio/wav") -> bytes:
    return (b'Content-Disposition: form-data; name="audio"; filename="' + filename + b'"\r\n'
            b"Content-Type: " + content_type)


# name: (body, its content type if not multipart with BOUNDARY, the status it is answered with)
ODD_FORMS: dict[str, tuple[bytes, str, int]] = {
    # What the browser says of the file is not passed on: the recording is named and typed by its bytes.
    "a file name with NUL": (multipart((audio_part(b"rec\x00ording.wav"), wav_recording())), "", 200),
    "a content type with NUL": (multipart((audio_part(content_type=b"audio/\x00wav"), wav_recording())), "", 200),
    # Parts Django's parser will not read, or reads as no file.
    "a file name that is not UTF-8": (multipart((audio_part(b"\xff\xfe.wav"), wav_recording())), "", 400),
    "a file name of 50 KB": (multipart((audio_part(b"x" * 50_000), wav_recording())), "", 400),
    "a content type of 10 KB": (multipart((audio_part(content_type=b"audio/" + b"x" * 10_000), wav_recording())),
                                "", 400),
    "the field as text with NUL": (multipart((b'Content-Disposition: form-data; name="audio"', b"\x00")), "", 400),
    "the field as bytes that are not UTF-8": (
        multipart((b'Content-Disposition: form-data; name="audio"', b"\xff\xfe\xfd")), "", 400),
    "a part without a name": (multipart((b"Content-Disposition: form-data", wav_recording())), "", 400),
    "a form cut off": (multipart((audio_part(), wav_recording()))[:200], "", 400),
    "no boundary": (multipart((audio_part(), wav_recording())), "multipart/form-data", 400),
    "a boundary of 1,000 characters": (b"--" + b"b" * 1000 + b"\r\n", "multipart/form-data; boundary=" + "b" * 1000,
                                       400),
    "2,000 fields": (multipart(*[(b'Content-Disposition: form-data; name="f%d"' % n, b"x") for n in range(2000)]),
                     "", 400),
    "200 files": (multipart(*[(b'Content-Disposition: form-data; name="f%d"; filename="a.wav"' % n, b"x")
                             for n in range(200)]), "", 400),
    "urlencoded NUL": (b"audio=%00", "application/x-www-form-urlencoded", 400),
    "urlencoded bytes that are not UTF-8": (b"audio=%FF%FE", "application/x-www-form-urlencoded", 400),
}


@pytest.mark.parametrize("odd", sorted(ODD_FORMS))
def test_an_odd_form_is_answered_in_words_never_a_500(dictation: FakeTranscriptionServer, alice: Any, odd: str) -> None:
    body, content_type, status = ODD_FORMS[odd]
    client = Client(raise_request_exception=False)
    client.force_login(alice)

    response = client.post(URL, body, content_type=content_type or f"multipart/form-data; boundary={BOUNDARY}")

    assert response.status_code == status, response.content
    assert set(response.json()) == ({"text"} if status == 200 else {"error"})
    received = [request.body["file"] for request in dictation.requests]
    assert received == ([FormFile("recording.wav", "audio/wav", wav_recording())] if status == 200 else [])
