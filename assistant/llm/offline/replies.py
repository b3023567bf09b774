"""How the offline model words its replies: what a tool's result says, a question for what is missing,
a choice between tools that fit as well, and a request beyond its tools.

Whether an example request is understood is the planner's to say (model.py), so it is passed in as
`understood` rather than imported: the planner imports these, never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .capabilities import Understood, capabilities, example, purpose
from .page import Page
from .results import MAX_ROWS_SHOWN, describe_row, facts_of_one, plural, read_outcome
from .schema import Reference, ToolInfo, types_of


def which_of(tied: list[ToolInfo], infos: list[ToolInfo], page: Page | None, understood: Understood) -> str:
    """Asking which of several tools is meant, each with a request that says it."""
    options = []
    for info in tied:
        said = example(info, infos, page, understood)
        option = f"- {purpose(info)}" + (f" — e.g. “{said}”" if said else "")
        options.append(option)
    return "Which do you mean? Say what it is, by its name in quotes or its id:\n" + "\n".join(options)


def beyond(text: str, infos: list[ToolInfo], page: Page | None, understood: Understood, part_of: str = "") -> str:
    """Saying plainly that a request (or a part of one) is beyond the tools offered, and what they do."""
    asked = " ".join(text.split()).rstrip(".")
    if part_of:
        intro = (f"I can't do this part of your request: “{asked}” — none of the tools offered to me does it, "
                 "so I did nothing. I'm the offline demo model. I can:")
    else:
        intro = (f"I can't do that: none of the tools offered to me fits “{asked}”. I'm the offline demo model, "
                 "so I only understand short requests that say what to do and to what. I can:")
    return capabilities(infos, understood, page=page, intro=intro, with_names=True)


def missing_reply(target: ToolInfo, missing: Sequence[str], infos: list[ToolInfo], page: Page | None,
                  understood: Understood) -> str:
    """Asking for what is missing in the person's words: "Which book (its id)?", not "pk"."""
    references = {reference.prop: reference for reference in target.references}
    asks = [_ask_for(prop, target, references.get(prop)) for prop in missing]
    question = asks[0][:1].upper() + asks[0][1:]
    if len(asks) > 1:
        question += ", and " + ", and ".join(asks[1:])
    said = purpose(target)
    text = f"{question}? I need {'it' if len(asks) == 1 else 'them'} to {said[:1].lower() + said[1:]}."
    shown = example(target, infos, page, understood)
    if shown:
        text += f" For example: “{shown}”."
    return text


def _ask_for(prop: str, target: ToolInfo, reference: Reference | None) -> str:
    """One missing argument as a question's words, from its schema's description and title."""
    schema = target.properties.get(prop, {})
    if reference is not None:
        by_name = reference.by_name or (bool(reference.choices) and "string" in types_of(schema))
        how = "its id or its exact name" if by_name else "its id"
        return f"which {reference.noun} ({how})"
    label = str(schema.get("title") or "").strip() or str(schema.get("description", "")).split(".", 1)[0].strip()
    said = (label or prop.replace("_", " ")).lower()
    if prop == target.text_field:
        return f"what {said} (in quotes)"
    return f"what {said}"


def _purpose(info: ToolInfo) -> str:
    sentence = info.spec.description.strip().split(". ")[0].rstrip(".")
    return (sentence[:1].lower() + sentence[1:]) if sentence else info.name


def result_reply(target: ToolInfo, arguments: dict[str, Any], content: str, qualifiers: Sequence[str] = ()) -> str:
    outcome = read_outcome(content)
    noun = target.primary_noun
    facts = facts_of_one(content, outcome.kind)
    if facts:
        said = purpose(target)
        return f"{said}:\n{facts}"
    if outcome.kind == "rows" or (target.is_read and outcome.kind == "done"):
        rows = outcome.rows
        what = " ".join([*qualifiers, plural(noun, 2 if len(rows) != 1 else 1)])
        if not rows:
            return f"No {what} matched." + (f" {outcome.message}" if outcome.message else "")
        shown = "\n".join(f"- {describe_row(row, target.labels)}" for row in rows[:MAX_ROWS_SHOWN])
        hidden = len(rows) - MAX_ROWS_SHOWN
        more = f"\n…and {hidden} more." if hidden > 0 else ""
        if outcome.more:
            more += "\nThere are more than these; narrow it down (a name in quotes, a status, a project)."
        return f"Found {len(rows)} {what}:\n{shown}{more}"
    if outcome.kind == "done":
        if outcome.message:
            return f"Done: {outcome.message}"  # the app's own words about what it did
        what = ", ".join(f"{k}: {v}" for k, v in arguments.items())
        return f"Done: {_purpose(target)}" + (f" ({what})." if what else ".")
    detail = f" ({outcome.explanation})" if outcome.explanation else ""
    if outcome.kind == "pending":
        return f"This needs your confirmation before I {_purpose(target)}."
    if outcome.kind == "declined":
        # Whatever the loop told the model about the refusal is an instruction to it, not news for the person.
        return "You declined, so nothing was changed."
    if outcome.kind == "denied":
        return f"You are not allowed to {_purpose(target)}{detail}; nothing was changed."
    if outcome.kind == "not_found":
        return f"That {noun or 'record'} was not found{detail}; nothing was changed."
    if outcome.kind == "unknown":
        return (
            f"I can't tell whether that took effect: the work on it stopped before it finished. "
            f"Check the current state before asking me to {_purpose(target)} again."
        )
    if outcome.kind == "invalid":
        if outcome.errors:
            errors = "\n".join(f"- {error}" for error in outcome.errors)
            message = f" {outcome.message}" if outcome.message else ""
            return f"The app did not accept that:{message}\n{errors}"
        return f"The app did not accept that{detail}."
    return f"That did not work{detail or ': the tool reported an error'}."
