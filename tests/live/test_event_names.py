"""The event names the code uses (assistant/infra/event_names.py) are exactly those docs/protocol.md documents, each
way: every event of its two tables has its name in the module, and the module names no event the tables lack."""

from __future__ import annotations

import re

from assistant.infra import event_names
from tests.conftest import PROJECT_DIR

PROTOCOL = PROJECT_DIR / "docs" / "protocol.md"


def documented(section: str) -> set[str]:
    """The event names that begin the rows of the table under the heading `section` of docs/protocol.md."""
    text = PROTOCOL.read_text()
    start = text.index(f"## {section}\n")
    following = re.search(r"^#{2,3} ", text[start + 3:], flags=re.MULTILINE)
    body = text[start:start + 3 + following.start()] if following else text[start:]
    return set(re.findall(r"^\| `(assistant\.[a-z_]+)` \|", body, flags=re.MULTILINE))


def test_client_events_are_the_documented_ones() -> None:
    names = documented("Client → server events")
    assert names, "the table of client events was not found"
    assert set(event_names.CLIENT_EVENTS) == names


def test_server_events_are_the_documented_ones() -> None:
    names = documented("Server → client events")
    assert names, "the table of server events was not found"
    assert set(event_names.SERVER_EVENTS) == names


def test_every_name_of_the_module_is_listed_or_said_to_be_no_event() -> None:
    constants = {value for name, value in vars(event_names).items() if name.isupper() and isinstance(value, str)}
    assert constants - event_names.CLIENT_EVENTS - event_names.SERVER_EVENTS == {
        event_names.LAYER_BATCH, event_names.NOTICE, event_names.CARD,
    }
