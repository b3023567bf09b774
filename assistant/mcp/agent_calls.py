"""A call made by the person's own agent (a run of channel `mcp`): one tool step, answered by the person in
their panel or through their agent, ended with a short reply in its chat.

Such a run has no worker: the agent that asked is what runs it, when it calls again (calls.py). So an approval
in the panel does not queue it; it marks the step approved, and the agent's next identical call takes it up
once. A no ends it here. The panel's answer reaches this through the channel's policy (channel.py), so the
socket's services import nothing of this app.
"""

from __future__ import annotations

from django.db import transaction

from assistant.infra import event_names
from assistant.live.events import publish_to_user
from assistant.live.payloads import message_payload, run_event, run_payload
from assistant.models import AgentMessage, AgentRun, AgentStep
from assistant.runs.lifecycle import chat_activity_record, run_finish, step_announce, step_finish
from assistant.runs.model_output import clean_text

APPROVED_FOR_RETRY = "Approved; it runs when your agent calls it again."
DECLINED = "You declined it; nothing was done."


def agent_call_answer(run: AgentRun, step: AgentStep, *, approve: bool) -> None:
    """The person answered the card of their agent's call in the panel (the run locked by the caller): an
    approval waits for the agent to call again, which runs it once; a no ends the run."""
    if approve:
        step.confirmation, step.reason = AgentStep.Confirmation.APPROVED, APPROVED_FOR_RETRY
        step.save(update_fields=["confirmation", "reason"])
        step_announce(run, step)
    else:
        agent_call_declined(run, step)


def agent_call_declined(run: AgentRun, step: AgentStep) -> None:
    """End a waiting call the person declined (through their agent, or in the panel): the step says so, and
    the run ends with that in its chat. The caller holds the run's lock."""
    step.confirmation = AgentStep.Confirmation.DENIED
    step_finish(run, step, {"status": "declined", "took_effect": False, "reason": DECLINED},
                also_saved=["confirmation"])
    agent_call_reply(run, [step], DECLINED)


def agent_call_reply(run: AgentRun, steps: list[AgentStep], text: str) -> AgentRun:
    """End the call's run with `text` as its reply, one message in its chat, announced after commit."""
    text = clean_text(text)
    run = run_finish(run=run, status=AgentRun.Status.SUCCEEDED, reply=text, steps=steps)
    message = AgentMessage.objects.create(chat_id=run.chat_id, owner_id=run.owner_id, role=AgentMessage.Role.ASSISTANT,
                                          content=text, run=run)
    transaction.on_commit(lambda: chat_activity_record(chat_id=run.chat_id, at=message.created_at), robust=True)
    publish_to_user(run.owner_id, run_event(event_names.REPLIED, run, message=message_payload(message),
                                            run=run_payload(run)))
    return run
