"""A chat's messages as a tree, and the thread a person reads through it.

Each message follows its parent: a question the answer before it (or a question left unanswered), an answer
its question. Editing a question adds a sibling beside it; answering a question again adds a sibling beside
its answer. The person reads one branch at a time: the path from the chat's first message down to its `leaf`
(the chat's newest message until they first branch). Ids grow with time, so along any path they increase, and
the newest message under any message has no children of its own: it is where that branch ends.

A branch never undoes what it did: what the runs of a branch the person is not reading changed is said
beside the branch switcher (`branch_payloads`), in the words its steps were recorded with.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from assistant.channel_policies import PANEL
from assistant.models import AgentAttachment, AgentChat, AgentMessage, AgentRun, AgentStep

THREAD_ROLES = (AgentMessage.Role.USER, AgentMessage.Role.ASSISTANT)
# How many of a branch's effects are listed beside its switcher; the rest are counted.
BRANCH_EFFECTS_LISTED = 5


@cache
def _path_sql() -> str:
    """The path up from a message: the one given, else the chat's newest of the thread."""
    table = AgentMessage._meta.db_table
    roles = ", ".join(f"'{role.value}'" for role in THREAD_ROLES)
    return (f'WITH RECURSIVE "path" ("id", "parent_id") AS ('  # noqa: S608 (the model's table and roles)
            f'SELECT "id", "parent_id" FROM "{table}" WHERE "id" = COALESCE(%s, (SELECT "id" FROM "{table}" '
            f'WHERE "chat_id" = %s AND "role" IN ({roles}) ORDER BY "id" DESC LIMIT 1)) '
            f'UNION ALL SELECT m."id", m."parent_id" FROM "{table}" m JOIN "path" ON m."id" = "path"."parent_id") '
            'SELECT "id" FROM "path" ORDER BY "id"')


@cache
def _below_sql() -> str:
    table = AgentMessage._meta.db_table
    return (f'WITH RECURSIVE "below" ("top", "id") AS ('  # noqa: S608 (the model's table)
            f'SELECT "id", "id" FROM "{table}" WHERE "id" = ANY(%s) '
            f'UNION ALL SELECT "below"."top", m."id" FROM "{table}" m JOIN "below" ON m."parent_id" = "below"."id") '
            'SELECT "top", "id" FROM "below"')


def path_ids(message_id: int | None, *, chat_id: int | None = None) -> list[int]:
    """The ids from the thread's first message down to `message_id`, its own last; without one, down to the newest
    message of the chat `chat_id` (one query)."""
    with connection.cursor() as cursor:
        cursor.execute(_path_sql(), [message_id, chat_id])
        return [row[0] for row in cursor.fetchall()]


def messages_below(message_ids: list[int]) -> dict[int, list[int]]:
    """Each of `message_ids` with the ids of every message under it, itself included (one query)."""
    if not message_ids:
        return {}
    below: dict[int, list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(_below_sql(), [list(message_ids)])
        for top, message_id in cursor.fetchall():
            below[top].append(message_id)
    return dict(below)


def newest_below(message_id: int) -> int:
    """Where the branch through `message_id` ends: the newest message under it (itself when it has none)."""
    return max(messages_below([message_id]).get(message_id, [message_id]))


def thread_end() -> Coalesce:
    """The last message of the branch a chat's person reads (its leaf, else its newest message), as an annotation
    of chats: read with the chat itself, in the same query."""
    newest = (AgentMessage.objects.filter(chat_id=OuterRef("pk"), role__in=THREAD_ROLES).order_by("-id")
              .values("id")[:1])
    return Coalesce(F("leaf_id"), Subquery(newest))


def thread_ids(chat: AgentChat) -> list[int]:
    """The ids of the branch the person reads, oldest first. A chat nobody talks in (the record of their agent's
    calls, which may come at once; an eval's replay) is one line: every message in the order written."""
    if chat.channel != PANEL.value:
        return list(AgentMessage.objects.filter(chat_id=chat.pk, role__in=THREAD_ROLES).order_by("id")
                    .values_list("id", flat=True))
    return path_ids(chat.leaf_id, chat_id=chat.pk)


@cache
def _history_sql() -> str:
    table, files = AgentMessage._meta.db_table, AgentAttachment._meta.db_table
    user = AgentMessage.Role.USER.value
    return (f'WITH RECURSIVE "path" AS ('  # noqa: S608 (the models' tables and a role)
            f'SELECT * FROM "{table}" WHERE "id" = COALESCE(%s, (SELECT "id" FROM "{table}" '
            f"WHERE \"run_id\" = %s AND \"role\" = '{user}' ORDER BY \"id\" LIMIT 1)) "
            f'UNION ALL SELECT m.* FROM "{table}" m JOIN "path" ON m."id" = "path"."parent_id") '
            # Whether each came with files, so that a branch without any needs no look for them.
            f'SELECT "path".*, EXISTS (SELECT 1 FROM "{files}" f WHERE f."message_id" = "path"."id") '
            'AS "has_attachments" FROM "path" ORDER BY "id"')


def thread_until_question(run: AgentRun) -> list[AgentMessage]:
    """The branch a top run answers, from the chat's first message down to the person's message it answers
    (the one it answers again, or the one that opened it), oldest first; [] for a run no message asked. One
    query; each message also says whether it came with files (`has_attachments`)."""
    return list(AgentMessage.objects.raw(_history_sql(), [run.answers_again_id, run.pk]))


def run_question(run: AgentRun) -> AgentMessage | None:
    """The person's message a top run answers: the one it answers again, or the one that opened it."""
    if run.answers_again_id is not None:
        return AgentMessage.objects.filter(pk=run.answers_again_id).first()
    return AgentMessage.objects.filter(run_id=run.pk, role=AgentMessage.Role.USER).order_by("id").first()


def message_siblings(messages: list[AgentMessage]) -> dict[int, list[int]]:
    """For each of `messages`, the ids of its branches (itself among them), oldest first: the messages of its
    role with its parent (a chat's first questions are each other's siblings). One query."""
    if not messages:
        return {}
    chat_id = messages[0].chat_id
    parents = {message.parent_id for message in messages if message.parent_id is not None}
    first = any(message.parent_id is None for message in messages)
    around = Q(parent_id__in=parents) | (Q(parent__isnull=True) if first else Q(pk__in=[]))
    kin: dict[tuple[int | None, str], list[int]] = defaultdict(list)
    for message_id, parent_id, role in (AgentMessage.objects.filter(chat_id=chat_id, role__in=THREAD_ROLES)
                                        .filter(around).order_by("id").values_list("id", "parent_id", "role")):
        kin[(parent_id, role)].append(message_id)
    return {message.pk: kin.get((message.parent_id, message.role), [message.pk]) for message in messages}


def effect_words(step: AgentStep) -> str:
    """A step that changed something, in the words it was recorded with: the view's own message when it
    gave one ("Created the task “Buy milk”."), else what the person approved, else the tool's name."""
    data = step.result.get("data") if isinstance(step.result, dict) else None
    said = data.get("messages") if isinstance(data, dict) else None
    for message in said if isinstance(said, list) else []:
        if isinstance(message, dict) and isinstance(message.get("text"), str) and message["text"].strip():
            return message["text"].strip()
    if step.summary:
        return f"Done: {step.summary}"
    return f"Ran {step.tool_name}"


def branches_did(message_ids: list[int]) -> dict[int, list[str]]:
    """What the runs of each branch under `message_ids` changed (the steps that took effect, in order), by
    the branch's first message. Two queries and one for the steps."""
    below = messages_below(message_ids)
    if not below:
        return {}
    branch_of = {message_id: top for top, ids in below.items() for message_id in ids}
    runs: dict[int, int] = {}
    for message_id, run_id in AgentMessage.objects.filter(pk__in=branch_of.keys(), run__isnull=False).values_list(
            "pk", "run_id"):
        runs[run_id] = branch_of[message_id]
    # A run that answered a question of the branch again, and ended without an answer, did its steps too.
    for run_id, asked in AgentRun.objects.filter(answers_again_id__in=branch_of.keys()).values_list(
            "pk", "answers_again_id"):
        runs[run_id] = branch_of[asked]
    did: dict[int, list[str]] = defaultdict(list)
    if not runs:
        return {}
    steps = (AgentStep.objects.filter(kind=AgentStep.Kind.TOOL_CALL, took_effect=True)
             .filter(Q(run_id__in=runs.keys()) | Q(run__root_id__in=runs.keys()))
             .select_related("run").order_by("run_id", "seq"))
    for step in steps:
        top_run = step.run_id if step.run_id in runs else step.run.root_id
        if top_run is not None:
            did[runs[top_run]].append(effect_words(step))
    return dict(did)


def branch_payloads(messages: list[AgentMessage]) -> dict[int, dict[str, Any]]:
    """For each of `messages` that has branches: its place among them and what each other branch did.

    `{"position": 2, "count": 2, "ids": [7, 12], "did": {"7": ["Created the task “Buy milk”."]}}`: the
    message is the second of two; the branch through message 7 created a task, which switching to this one
    did not undo. A branch that changed nothing is absent from `did`."""
    kin = message_siblings(messages)
    forks = {message_id: ids for message_id, ids in kin.items() if len(ids) > 1}
    if not forks:
        return {}
    others = sorted({other for message_id, ids in forks.items() for other in ids if other != message_id})
    did = branches_did(others)
    payloads = {}
    for message_id, ids in forks.items():
        effects = {str(other): _listed(did[other]) for other in ids if other != message_id and did.get(other)}
        payloads[message_id] = {"position": ids.index(message_id) + 1, "count": len(ids), "ids": ids, "did": effects}
    return payloads


def _listed(effects: list[str]) -> list[str]:
    if len(effects) <= BRANCH_EFFECTS_LISTED:
        return effects
    more = len(effects) - BRANCH_EFFECTS_LISTED + 1
    return [*effects[: BRANCH_EFFECTS_LISTED - 1], f"…and {more} more changes"]
