"""The stop reasons the code writes (AgentRun.StopReason) are exactly those docs/protocol.md documents in its
table of `stop_reason`, each with the status the table gives it."""

from __future__ import annotations

import re

from assistant.models import AgentRun
from tests.conftest import PROJECT_DIR


def test_stop_reasons_are_the_documented_ones() -> None:
    text = (PROJECT_DIR / "docs" / "protocol.md").read_text()
    header = "| `stop_reason` | `status` | Cause |\n"
    table = text[text.index(header) + len(header):]
    table = table[:table.index("\n\n")]
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| `([a-z_]+)` \|", table, flags=re.MULTILINE))
    assert set(documented) == set(AgentRun.StopReason.values)
    assert set(documented.values()) <= set(AgentRun.Status.values)
