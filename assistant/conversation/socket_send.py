"""A message sent from the panel's socket: stored only while the session it came with still signs its person
in, and kept when Redis fails after the commit, the sender being told so on their own socket.

The socket's consumer runs this on a database thread; the session check rides on the same trip as the send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from assistant.access.authority import SentFrom, SessionEnded, session_acts_as
from assistant.conversation import services
from assistant.infra.outage import UNAVAILABLE_ERRORS
from assistant.runs.lifecycle import sent_event

logger = logging.getLogger(__name__)


def chat_send_from_socket(user: Any, *, content: str, chat_id: int | None, new_chat: bool, request_id: Any,
                          sent_from: SentFrom | None, page: str | None = None, edit_of: int | None = None,
                          attachments: list[int] | None = None) -> dict[str, Any] | None:
    """Store the message and its queued run, then start the run and announce it (services.chat_send).

    When the rows are stored but Redis refuses what follows the commit (starting the run, announcing
    it), returns the `assistant.sent` event for the sender's own socket: the message is kept, and the
    sweeper starts its queued run once Redis is back. Returns None when everything went out.
    """
    return _stored_from_socket(user, sent_from, request_id, lambda: services.chat_send(
        user=user, content=content, chat_id=chat_id, new_chat=new_chat, request_id=request_id, sent_from=sent_from,
        page=page, edit_of=edit_of, attachments=attachments))


def chat_regenerate_from_socket(user: Any, *, message_id: int, request_id: Any,
                                sent_from: SentFrom | None) -> dict[str, Any] | None:
    """Answer one of the person's messages again (services.chat_regenerate), as `chat_send_from_socket` sends."""
    return _stored_from_socket(user, sent_from, request_id, lambda: services.chat_regenerate(
        user=user, message_id=message_id, request_id=request_id, sent_from=sent_from))


def _stored_from_socket(user: Any, sent_from: SentFrom | None, request_id: Any,
                        store: Callable[[], services.Sent]) -> dict[str, Any] | None:
    # A message is an instruction to act as the person: only while the session it comes with is live.
    # Checked here, in the same trip to the database thread as the send.
    if sent_from is not None and not session_acts_as(sent_from.session_key, user.pk):
        raise SessionEnded()
    sent = None
    try:
        with transaction.atomic():  # so that what runs on commit fails here, after `sent` is known
            sent = store()
    except UNAVAILABLE_ERRORS:
        if sent is None:
            raise
        logger.warning("Run %s is stored but could not be started now; the sweeper will start it", sent.run.pk,
                       exc_info=True)
        # Told as everyone would have been: with the message's branch and files.
        return sent_event(sent.run, sent.chat, sent.message, request_id=request_id, **sent.announced)
    return None
