"""The panel's record of a run, as AG-UI events (docs/ag-ui.md, "Events").

A `Translator` follows one top run and the members it asks, for one AG-UI run of the client. It is fed two
things: the text the models stream (the panel's `assistant.token` deltas, `token`), and the rows (`state`,
the tree's runs and steps as `assistant.agui.runs.tree_state` reads them, each a step as the panel's
`assistant.step` event carries it). Everything but the streamed text comes from the rows: a lost event
changes nothing, and a stream that re-attaches, or reads again after a gap, catches up by comparing the rows
with what it has said. Each step, tool call and result is said once; a message is never said twice.

Ids on the wire are made from the rows, so that a later stream, and a messages snapshot, name the same things
the same way: a model call's text is `msg-<run>-<seq>`, a tool step's call `call-<run>-<seq>` and its result
`result-<run>-<seq>`, a member's run `run-<run>` (its `subagentRunId`), an approval's interrupt
`approval-<step id>` (`wire.py`).

One module per family of events, each a part of the `Translator` (`translator.py`, what it is fed): the
members as subagents (`members.py`), the text messages (`text.py`), the steps with their tool calls and
notices (`steps.py`), the run's end, finished or failed (`endings.py`), and the approvals it waits on as
interrupts (`interrupts.py`); what they share of the run is `state.py`.

Nothing here touches the database, the channel layer or the clock: it is the pure part, tested alone.
"""

from __future__ import annotations

from assistant.agui.translate.endings import SnapshotHere
from assistant.agui.translate.translator import Translator

__all__ = ["SnapshotHere", "Translator"]
