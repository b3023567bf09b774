"""An eval's replays act as the recording's person, in a chat they never see: staff's experiment, not their
sends. So the runs an eval makes count nothing against how many messages they may send in a minute."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assistant.conversation.services import Refused, chat_send
from assistant.evals.cases import case_add, set_named
from assistant.evals.replays import Candidate, eval_run_start
from tests.conftest import WorkerProcess, assistant_settings_with
from tests.evals.test_evals_replay import RECORD_MILK, finished, recorded_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_an_eval_runs_replays_count_nothing_against_the_persons_sends(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    # Alice sent one message this minute (the recording); staff replay it against three candidates as her.
    eval_set = set_named("milk", create=True)
    case_add(eval_set, recorded_run(alice, "record milk", script(RECORD_MILK, {"text": "Recorded milk."})))
    candidates = [Candidate(f"candidate-{number}", model=script({"text": "No."})) for number in range(3)]
    finished(eval_run_start(eval_set, candidates))

    with assistant_settings_with(RUNS_PER_MINUTE=3):
        sent = chat_send(user=alice, content="what is due this week?", new_chat=True)

    assert sent.run.status == "queued"  # her second message of the minute, under a limit of three


def test_the_members_a_request_asks_count_nothing_against_the_persons_sends(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    # Her first message this minute went to the demo society: one request, four members asked for it.
    from assistant.models import AgentRun

    first = chat_send(user=alice, content="create a project Garden with a task, then list my tasks", new_chat=True)
    top = AgentRun.objects.get(pk=first.run.pk)
    for spec in ("keeper", "clerk", "clerk", "reader"):
        AgentRun.objects.create(owner=alice, chat=top.chat, spec=spec, parent=top, root=top, depth=1, task="a part",
                                model=top.model, config=top.config)

    with assistant_settings_with(RUNS_PER_MINUTE=2):
        sent = chat_send(user=alice, content="and what is due this week?", new_chat=True)
        assert sent.run.status == "queued"  # her second message of the minute, under a limit of two
        with pytest.raises(Refused, match="faster than the assistant accepts"):
            chat_send(user=alice, content="and next week?", new_chat=True)
