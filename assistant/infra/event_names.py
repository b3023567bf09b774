"""The names of the live protocol's events (docs/protocol.md), in one place: the code that sends or handles an
event names it here, so a name the documentation does not know cannot creep in (a test reads both)."""

from __future__ import annotations

from typing import Final

# Sent by a client ("Client → server events").
PING: Final = "assistant.ping"
SEND: Final = "assistant.send"
CANCEL: Final = "assistant.cancel"
# Both ways: the person's answer comes in under it, and a run's question goes out under it.
CONFIRM: Final = "assistant.confirm"
LOAD: Final = "assistant.load"
CHATS: Final = "assistant.chats"
CHAT_RENAME: Final = "assistant.chat_rename"
CHAT_DELETE: Final = "assistant.chat_delete"
PAGE: Final = "assistant.page"
FEEDBACK: Final = "assistant.feedback"
REGENERATE: Final = "assistant.regenerate"
BRANCH: Final = "assistant.branch"

# Sent by the server ("Server → client events").
PONG: Final = "assistant.pong"
SENT: Final = "assistant.sent"
STEP: Final = "assistant.step"
# The model's streamed text, a delta at a time ("token" would read as an access token here).
TEXT_DELTA: Final = "assistant.token"
PLAN: Final = "assistant.plan"
REPLIED: Final = "assistant.replied"
REPLY_FAILED: Final = "assistant.reply_failed"
CANCELLED: Final = "assistant.cancelled"
FEEDBACK_SAVED: Final = "assistant.feedback_saved"
MESSAGES_LOADED: Final = "assistant.messages_loaded"
PAGE_CONTEXT: Final = "assistant.page_context"
CHATS_LISTED: Final = "assistant.chats_listed"
CHAT_UPDATED: Final = "assistant.chat_updated"
CHAT_DELETED: Final = "assistant.chat_deleted"
THREAD_FAILED: Final = "assistant.thread_failed"
ERROR: Final = "assistant.error"
SESSION_ENDED: Final = "assistant.session_ended"
RESYNC: Final = "assistant.resync"
THREAD_CHANGED: Final = "assistant.thread_changed"

CLIENT_EVENTS: Final = frozenset({PING, SEND, CANCEL, CONFIRM, LOAD, CHATS, CHAT_RENAME, CHAT_DELETE, PAGE, FEEDBACK,
                                       REGENERATE, BRANCH})
SERVER_EVENTS: Final = frozenset({
    PONG, SENT, STEP, TEXT_DELTA, CONFIRM, PLAN, REPLIED, REPLY_FAILED, CANCELLED, FEEDBACK_SAVED, MESSAGES_LOADED,
    PAGE_CONTEXT, CHATS_LISTED, CHAT_UPDATED, CHAT_DELETED, THREAD_FAILED, ERROR, SESSION_ENDED, RESYNC,
    THREAD_CHANGED,
})

# Not events of the socket, and so not in the lists above:
#: the channel layer's message that carries a batch of events to a person's sockets (assistant/live/events.py);
LAYER_BATCH: Final = "assistant.events"
#: the AG-UI `CUSTOM` event a notice step becomes (docs/ag-ui.md; a plan keeps its name, PLAN).
NOTICE: Final = "assistant.notice"
#: the AG-UI `CUSTOM` event that carries a step's card, after its tool call's result (docs/ag-ui.md).
CARD: Final = "assistant.card"
