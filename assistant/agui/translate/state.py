"""What a `Translator` remembers of one AG-UI run: what it has said, of which run, and what is still open.

Every family of events (the modules beside this one) reads and writes this one record, so it is declared once,
here, with what every family needs: whose an event is (`_by`), and which run statuses mean a tree still works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assistant.agui.translate.wire import subagent_id

#: The runs of a tree that still work (a worker has them, or will): the tree is not paused while one does.
WORKING = ("queued", "running")
#: A run that waits, holding no worker.
WAITING = ("awaiting_confirmation", "awaiting_members")


@dataclass
class OpenText:
    """A text message said and not yet ended: its id on the wire, and what of it was said."""

    message_id: str
    said: str = ""


@dataclass
class TranslatorState:
    """The state of one AG-UI run's view of one top run (`top`) and its members; see the package docstring."""

    thread_id: str
    run_id: str
    top: int
    finished: bool = False
    #: Set when what the client holds differs from the record: a snapshot is sent before the run ends.
    owe_snapshot: bool = False
    _texts: dict[int, OpenText] = field(default_factory=dict)
    #: Per run, recorded text said from the rows before its deltas arrived: those deltas, when they come, are
    #: not said again.
    _unstreamed: dict[int, str] = field(default_factory=dict)
    _last_seq: dict[int, int] = field(default_factory=dict)
    _last_model: dict[int, int] = field(default_factory=dict)
    _last_model_text: dict[int, str] = field(default_factory=dict)
    _called: set[tuple[int, int]] = field(default_factory=set)
    _resulted: set[tuple[int, int]] = field(default_factory=set)
    _modelled: set[tuple[int, int]] = field(default_factory=set)
    _noticed: set[tuple[int, int]] = field(default_factory=set)
    _open_steps: dict[tuple[int, int], str] = field(default_factory=dict)
    _step_keys: dict[int, tuple[int, int]] = field(default_factory=dict)
    _members: dict[int, dict[str, Any]] = field(default_factory=dict)
    _active: dict[int, None] = field(default_factory=dict)  # active subagents, in the order they started
    _ended: set[int] = field(default_factory=set)
    _rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    _walked: set[int] = field(default_factory=set)

    def _close_text(self, run: int, final: tuple[str, str] | None = None) -> list[Any]:
        """End the run's open text (the text family's, text.py). Declared here because a member's end closes its
        text, and the members' family sits below the text's, whose streamed text starts a member."""
        raise NotImplementedError

    # --- attribution ---------------------------------------------------------------------------

    def _by(self, run: int) -> dict[str, Any]:
        return {} if run == self.top else {"subagent_run_id": subagent_id(run)}
