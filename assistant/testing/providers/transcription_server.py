"""A fake OpenAI-compatible transcription server: `POST /v1/audio/transcriptions`, as OpenAI and local servers
(faster-whisper-server, vLLM) speak it."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message
from typing import Any

from .server import FakeServer, Reply

#: The file names' extensions OpenAI's endpoint takes (it tells the format by the name).
AUDIO_EXTENSIONS = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")
RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


@dataclass(frozen=True)
class FormFile:
    """A file part of a multipart form, as the server received it."""

    filename: str
    content_type: str
    data: bytes


def transcription_reply(text: str) -> Reply:
    """What the server answers a transcription with: `{"text": ...}`."""
    return Reply(json={"text": text})


class FakeTranscriptionServer(FakeServer):
    """Answers POST /v1/audio/transcriptions: a multipart form with the recording (`file`) and the `model`.
    Refuses forms the real API would refuse (HTTP 400); records each form as a dict of its fields, a file as a
    `FormFile`. Answers `transcription_reply(text)` unless told otherwise (`queue`)."""

    path = "/v1/audio/transcriptions"
    unreadable = "the body must be a multipart/form-data form"
    #: The text of the default answer.
    text = "fake transcript"

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    def read_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        return multipart_fields(raw, headers.get("content-type", ""))

    def default_reply(self, body: Any) -> Reply:
        return transcription_reply(self.text)

    def bad_request(self, message: str) -> Reply:
        return Reply(status=400, json={"error": {"message": message, "type": "invalid_request_error"}})

    def validate(self, body: Any, headers: dict[str, str]) -> str | None:
        if not headers.get("authorization", "").startswith("Bearer "):
            return "missing bearer token"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "model is required"
        audio = body.get("file")
        if not isinstance(audio, FormFile):
            return "file is required"
        if not audio.data:
            return "the audio file is empty"
        extension = audio.filename.rpartition(".")[2].lower()
        if extension not in AUDIO_EXTENSIONS:
            return f"Invalid file format {extension!r}. Supported formats: {list(AUDIO_EXTENSIONS)}"
        if body.get("response_format", "json") not in RESPONSE_FORMATS:
            return f"response_format must be one of {list(RESPONSE_FORMATS)}"
        return None


def multipart_fields(raw: bytes, content_type: str) -> dict[str, Any] | None:
    """The fields of a multipart/form-data body (a file as a `FormFile`, any other field as text), or None for a
    body that is no such form. Split by hand: a recording's bytes are kept exactly as sent."""
    header = Message()
    header["content-type"] = content_type
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/form-data" or not isinstance(boundary, str) or not boundary:
        return None
    fields: dict[str, Any] = {}
    for part in raw.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):  # the closing delimiter
            break
        head, separator, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not separator:
            return None
        data = data.removesuffix(b"\r\n")
        part_headers = Message()
        for line in head.decode("utf-8", errors="replace").split("\r\n"):
            header_name, _, value = line.partition(":")
            part_headers[header_name.strip()] = value.strip()
        field = part_headers.get_param("name", header="content-disposition")
        if not isinstance(field, str):
            return None
        filename = part_headers.get_param("filename", header="content-disposition")
        if isinstance(filename, str):
            fields[field] = FormFile(filename, part_headers.get("content-type", ""), data)
        else:
            fields[field] = data.decode("utf-8", errors="replace")
    return fields
