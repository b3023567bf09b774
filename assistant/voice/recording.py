"""What the dictation endpoint accepts as a recording: audio in a container the transcription servers read,
no larger than DICTATION_MAX_BYTES, held in memory only (never in a temporary file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.files.uploadhandler import MemoryFileUploadHandler, StopUpload
from django.http import HttpRequest

#: What the refusal of a recording in another format names.
FORMATS_IN_WORDS = "WebM, Ogg, MP4, MP3, WAV or FLAC audio"


#: Each container's content type, as the recording is sent on: what the browser declared is not passed along.
CONTENT_TYPES = {"webm": "audio/webm", "ogg": "audio/ogg", "mp4": "audio/mp4", "wav": "audio/wav",
                 "flac": "audio/flac", "mp3": "audio/mpeg"}


@dataclass(frozen=True)
class Recording:
    """A recording to transcribe: its bytes and its container, as a file extension (the transcription servers
    tell the format by the file's name)."""

    data: bytes
    format: str

    @property
    def filename(self) -> str:
        return f"recording.{self.format}"

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]


def audio_format(head: bytes) -> str | None:
    """The container of a recording, from its first bytes, or None for anything else. The content type a browser
    declares is only a claim; these are what the file is. Browsers record WebM or Ogg (Opus) or MP4 (AAC)."""
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # EBML: WebM (Matroska)
        return "webm"
    if head.startswith(b"OggS"):
        return "ogg"
    if head[4:8] == b"ftyp":  # an ISO media file: MP4, M4A
        return "mp4"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    # MP3: a tag first, or an MPEG audio frame's sync bits with a layer set (AAC's ADTS frames have none).
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0
                                   and (head[1] >> 1) & 0b11):
        return "mp3"
    return None


def is_audio_type(content_type: str) -> bool:
    """Whether a declared content type may hold a recording: audio, or a media container (a browser may name an
    audio-only MP4 or WebM as video)."""
    main = content_type.split(";", 1)[0].strip().lower()
    return main.startswith(("audio/", "video/")) or main == "application/octet-stream"


class RecordingInMemory(MemoryFileUploadHandler):
    """Keeps an upload in memory, whatever its announced length, and stops reading once the files sent pass
    `max_bytes` (`too_large` then says so): a request that announces less than it sends is bounded too."""

    def __init__(self, request: HttpRequest, max_bytes: int) -> None:
        super().__init__(request)
        self.max_bytes = max_bytes
        self.received = 0
        self.too_large = False

    def handle_raw_input(self, *args: Any, **kwargs: Any) -> None:
        # Django's handler keeps only small uploads in memory and leaves larger ones to a temporary file; this one
        # keeps every upload, as it never lets one grow past max_bytes.
        self.activated = True

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.max_bytes:
            self.too_large = True
            raise StopUpload(connection_reset=False)
        return super().receive_data_chunk(raw_data, start)
