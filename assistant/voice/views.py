"""`POST /assistant/transcribe/` (`assistant:transcribe`): the panel's recording in, its text out.

A multipart form with the recording in the field `audio`, from a signed-in person, with the site's CSRF token
(the `X-CSRFToken` header). Answers `{"text": "..."}`, or `{"error": "..."}` in words: 403 (not signed in, or the
CSRF check failed), 404 (dictation is off), 400 (no recording), 413 (larger than DICTATION_MAX_BYTES), 415 (not a
recording in a known format), 429 (past DICTATIONS_PER_MINUTE, with Retry-After), 422 (the transcription server
refused it), 503 (the server failed, timed out or is not configured right; logged as a warning). Nothing of the
recording is stored, and its text goes nowhere but back to the person.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from assistant.conf import assistant_settings
from assistant.voice.limits import dictation_counted
from assistant.voice.recording import FORMATS_IN_WORDS, Recording, RecordingInMemory, audio_format, is_audio_type
from assistant.voice.transcription import (
    UNAVAILABLE,
    DictationUnavailable,
    RecordingUnreadable,
    dictation_on,
    transcribe,
)

logger = logging.getLogger(__name__)

#: The room a multipart body takes besides the recording's bytes (boundaries, part headers, a file name).
MULTIPART_ALLOWANCE = 16_384


def _refusal(status: HTTPStatus, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


class _Csrf(CsrfViewMiddleware):
    """Django's own CSRF check, answering a refusal in the endpoint's JSON instead of the site's 403 page."""

    def _reject(self, request: HttpRequest, reason: str) -> HttpResponse:
        logger.info("Dictation refused by the CSRF check: %s", reason)
        return _refusal(HTTPStatus.FORBIDDEN, "The page's security check failed. Reload the page and try again.")


def _no_view(request: HttpRequest) -> HttpResponse:  # what the CSRF middleware would call next (never here)
    raise AssertionError("not called")


@csrf_exempt  # checked in _accept, once the upload handlers are set: the middleware would read the body first
@require_POST
async def transcribe_view(request: HttpRequest) -> HttpResponse:
    """The recording's text, for the person to check in the message box and send themselves.

    Asynchronous so that a slow transcription server holds no thread that the site's other views need: the checks
    run in Django's thread for sync code, the transcription in a thread of its own."""
    accepted = await sync_to_async(_accept)(request)
    if isinstance(accepted, HttpResponse):
        return accepted
    try:
        text = await sync_to_async(transcribe, thread_sensitive=False)(accepted)
    except RecordingUnreadable as unreadable:
        return _refusal(HTTPStatus.UNPROCESSABLE_ENTITY, unreadable.message)
    except DictationUnavailable as unavailable:
        return _refusal(HTTPStatus.SERVICE_UNAVAILABLE, unavailable.message)
    return JsonResponse({"text": text})


def _accept(request: HttpRequest) -> Recording | HttpResponse:
    """The recording this request carries, or the answer refusing it. Nothing reaches the transcription server,
    and nothing is counted against the person, until every check has passed."""
    if not request.user.is_authenticated:
        return _refusal(HTTPStatus.FORBIDDEN, "Sign in to use dictation.")
    if not dictation_on():
        return _refusal(HTTPStatus.NOT_FOUND, "Dictation is not available on this site.")
    max_bytes = int(assistant_settings.DICTATION_MAX_BYTES)
    too_large = _refusal(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"The recording is too large: at most {_megabytes(max_bytes)}. Record a shorter message.",
    )
    if _announced_length(request) > max_bytes + MULTIPART_ALLOWANCE:
        return too_large  # refused before its body is read
    upload_handler = RecordingInMemory(request, max_bytes)
    request.upload_handlers = [upload_handler]
    try:
        refused = _Csrf(_no_view).process_view(request, _no_view, (), {})  # it reads the form first
        if refused is not None:
            return refused
        upload = request.FILES.get("audio")
    except RequestDataTooBig:  # the form's other fields, past DATA_UPLOAD_MAX_MEMORY_SIZE
        return too_large
    except (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent):
        return _refusal(HTTPStatus.BAD_REQUEST,
                        "The request could not be read: send the recording as the field `audio` of a multipart form.")
    if upload_handler.too_large:
        return too_large
    if upload is None:
        return _refusal(HTTPStatus.BAD_REQUEST,
                        "No recording was sent: send it as the field `audio` of a multipart form.")
    data = upload.read()
    if not data:
        return _refusal(HTTPStatus.BAD_REQUEST, "The recording is empty. Record again.")
    audio = audio_format(data[:16])
    if audio is None or not is_audio_type(upload.content_type or ""):
        return _refusal(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                        f"That is not a recording dictation can read: it takes {FORMATS_IN_WORDS}.")
    try:
        wait = dictation_counted(request.user.pk)
    except RedisError:
        logger.warning("Dictation refused: the assistant's Redis did not answer", exc_info=True)
        return _refusal(HTTPStatus.SERVICE_UNAVAILABLE, UNAVAILABLE)
    if wait is not None:
        return _refusal(
            HTTPStatus.TOO_MANY_REQUESTS,
            f"That is the most dictation this site allows in a minute ({assistant_settings.DICTATIONS_PER_MINUTE}). "
            f"Try again in {wait} seconds, or type your message.",
            **{"Retry-After": str(wait)},
        )
    return Recording(data=data, format=audio)


def _announced_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _megabytes(size: Any) -> str:
    megabytes = int(size) / 1_000_000
    return f"{megabytes:g} MB" if megabytes >= 1 else f"{int(size) // 1000} kB"
