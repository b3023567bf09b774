"""What the assistant may know of the page the person has open: its object, read as the person.

The object is read the way the model's own reads are (assistant/tools/executor.py): a declared read of
its model the person may use, narrowed to the row the page names, through the site's middleware with
the person's session and the read's scope; or, for a page whose own view is a read tool (a DetailView
with `fields=`), that view fired as the person. Only the declared fields are kept. A page whose object
the person cannot open — another person's project, a deleted one, a read nobody declared — gives
nothing, the same nothing for each, so the path reveals no more than the page itself would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assistant.access.authority import SentFrom
from assistant.page_context.resolve import PageSubject, page_subject
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.executor import ANY_TOOL, execute_tool, read_rows
from assistant.tools.registry import _declared_on, registry

#: The field whose value names an object in words, the first the read declares.
NAME_FIELDS = ("name", "title", "subject", "label", "headline", "username", "email")


@dataclass(frozen=True)
class PageContext:
    """The page's object as the model gets it (data, between delimiters) and the panel shows it."""

    path: str
    model: str
    kind: str
    id: Any
    name: str
    fields: dict[str, Any] = field(default_factory=dict)
    # Text in `fields` written by anyone but the person (assistant/tools/provenance.py): a run asked from
    # this page has read it.
    others_text: list[dict[str, Any]] = field(default_factory=list)

    @property
    def about(self) -> str:
        """What the panel shows: `project “Home”`."""
        return f"{self.kind} “{self.name}”" if self.name else f"{self.kind} #{self.id}"

    @property
    def label(self) -> str:
        """How the model is told it: `the project “Home” (#12)`."""
        return f"the {self.kind} “{self.name}” (#{self.id})" if self.name else f"the {self.kind} #{self.id}"

    def as_data(self) -> dict[str, Any]:
        return {"path": self.path, "model": self.model, "kind": self.kind, "id": self.id, "label": self.label,
                "fields": self.fields, "others_text": self.others_text}

    @classmethod
    def from_data(cls, data: Any) -> PageContext | None:
        """Back from what a run keeps (`as_data`), or None for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("fields"), dict):
            return None
        fields = data["fields"]
        carried = data.get("others_text")
        return cls(path=str(data.get("path") or ""), model=str(data.get("model") or ""),
                   kind=str(data.get("kind") or ""), id=data.get("id"), name=_name_of(fields), fields=fields,
                   others_text=carried if isinstance(carried, list) else [])


def _name_of(fields: dict[str, Any]) -> str:
    for name in NAME_FIELDS:
        value = fields.get(name)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:120]
    return ""


def _reads_of(subject: PageSubject) -> list[ReadTool]:
    return [definition for definition in registry.all()
            if isinstance(definition, ReadTool) and definition.model is subject.model]


#: Where a run read what the page it was asked from shows.
ON_THE_PAGE = "the page you asked from"


def _read_fields(user: Any, subject: PageSubject, sent_from: SentFrom | None
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The page's object's declared fields as `user` may read them, and whose text they carry; None."""
    for definition in _reads_of(subject):
        outcome = read_rows(user, definition, {subject.lookup: subject.value}, sent_from=sent_from)
        rows = (outcome.data or {}).get("results") if outcome.status == "data" else None
        if rows:
            return dict(rows[0]), _on_the_page(outcome.others_text)
    own = _declared_on(subject.view)
    if isinstance(own, ViewTool) and own.kind == "read" and own.fields:
        outcome = execute_tool(user, own.name, subject.url_kwargs, spec=ANY_TOOL, profile="restricted",
                               sent_from=sent_from)
        if outcome.status == "data" and isinstance(outcome.data, dict) and "results" not in outcome.data:
            return dict(outcome.data), _on_the_page(outcome.others_text)
    return None


def _on_the_page(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**source, "where": ON_THE_PAGE} for source in sources]


def page_context(user: Any, page: Any, *, sent_from: SentFrom | None = None) -> PageContext | None:
    """The object of the page at `page` as `user` may see it, or None. Raises BadPage for a `page` that
    is not a path of this site."""
    subject = page_subject(page)
    if subject is None:
        return None
    found = _read_fields(user, subject, sent_from)
    if found is None:
        return None
    fields, others = found
    object_id = fields.get("id", fields.get("pk", subject.value))
    return PageContext(path=subject.path, model=subject.label_model, kind=subject.kind, id=object_id,
                       name=_name_of(fields), fields=fields, others_text=others)
