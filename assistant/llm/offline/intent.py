"""Which one tool a request plainly asks for, read with the offline model's English word matching: what handing a
request to a member without a model call stands on (assistant/society/routing.py).

It is cautious on purpose. A request is plain only when it stands alone and one tool fits it better than every
other: a request routed wrongly costs a member's run, one not routed costs one model call.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from ..types import ToolSpec
from .capabilities import asks_what_i_can_do
from .files import split_files, usable
from .greetings import is_greeting
from .model import MIN_SCORE, _choose_tool, _score
from .page import points
from .schema import analyse_tools
from .society import split_request
from .text import read_request


def plain_intent(text: str, tools: Sequence[ToolSpec]) -> str | None:
    """The name of the one tool of `tools` that `text` plainly asks for, or None when it is not plain: a
    greeting or a question about the assistant, a request of several parts, one that points at something
    ("this", "it") rather than naming it, or one that two tools fit as well."""
    text, files = split_files(text)
    if not text.strip() or is_greeting(text) or asks_what_i_can_do(text) or points(text):
        return None
    infos = analyse_tools(list({tool.name: tool for tool in usable(tools, files)}.values()))
    if len(split_request(text, frozenset(noun for info in infos for noun in info.nouns))) != 1:
        return None
    request = read_request(text, today=timezone.localdate())
    chosen = _choose_tool(request, infos)
    if chosen is None:
        return None
    scores = sorted((_score(request, info) for info in infos), reverse=True)
    if scores[0] < MIN_SCORE or (len(scores) > 1 and scores[1] >= scores[0]):
        return None  # another tool fits as well: the model decides
    return chosen.name
