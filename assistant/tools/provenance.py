"""Whose text the model reads: `authored(Model, by=...)`, declared once per model, and what every read, view
tool and page context of that model says it carries.

A value the site makes (an id, a status, a date, a count, a choice) is nobody's text. A text field (a
CharField or TextField without choices) is written by the people its model's declaration names: a
comment by its `author`, a task by everyone in its project (`project__owner`, `project__members`), since
any of them may have renamed it. A model declared `site=True` holds the site's own text (written by its
staff or its code), and the user model's text is each user's own. Text of a model nothing declares counts
as written by someone other than the person (safe by default; `manage.py check` names such reads,
assistant.W027). A read that carries text written by anyone but the person says so, in `others_text`:
who wrote it and where it was read. A run that read such text asks the person before any effect
(assistant/turn/confirmation.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db import models

#: Who wrote a text nobody declared, or whose author is gone: not the person, as far as anyone can tell.
SOMEONE = "someone else"
#: Field types whose values are somebody's words (without choices: a choice is the site's value).
TEXT_TYPES = frozenset({"CharField", "TextField", "EmailField", "SlugField", "URLField"})
#: What a run that read text written by anyone but the person does before an effect (a spec's `containment`,
#: the CONTAINMENT setting by default): ask the person first, refuse it, or let it be (for a spec that never
#: meets other people's text; a destructive call still asks).
CONTAINMENTS = ("approve", "refuse", "allow")
#: How many objects a source names by id (the rest are counted).
IDS_SHOWN = 10


@dataclass(frozen=True)
class Authorship:
    """Who writes the text of a model's rows: the users at `by` (paths from the model to a user, following
    relations with `__`), or the site itself."""

    model: type[models.Model]
    by: tuple[str, ...] = ()
    site: bool = False


_declared: dict[type[models.Model], Authorship] = {}


def authored(model: type[models.Model], *, by: str | Sequence[str] = (), site: bool = False) -> None:
    """Declare, once per model, who writes the text of its rows, for every read, view tool and page context
    of that model: `authored(Comment, by="author")`, `authored(Task, by=["project__owner",
    "project__members"])` (everyone who may change it), or `authored(Category, site=True)` for text only the
    site's staff or code writes. Put it in the app's `assistant_tools.py`, beside the model's reads."""
    if not (inspect.isclass(model) and issubclass(model, models.Model)):
        raise TypeError(f"authored() takes a model class, not {model!r}.")
    paths = (by,) if isinstance(by, str) else tuple(by)
    if site == bool(paths):
        raise ValueError(f"authored({model.__name__}): name who writes its text with by=, or say site=True "
                         "for text only the site writes (one of them).")
    if not all(isinstance(path, str) and path for path in paths):
        raise TypeError(f"authored({model.__name__}): by= takes field paths to a user, such as 'author'.")
    _declared[model] = Authorship(model=model, by=paths, site=site)


def authorship(model: type[models.Model]) -> Authorship | None:
    """What is declared for `model` (the user model writes its own text), or None when nothing is."""
    found = _declared.get(model)
    if found is not None:
        return found
    if model is get_user_model():
        return Authorship(model=model, by=("pk",))
    return None


def declared_authorships() -> list[Authorship]:
    return list(_declared.values())


def model_field(model: type[models.Model], path: str) -> Any:
    """The model field at the end of a `related__field` path (`pk` is the primary key); raises
    FieldDoesNotExist."""
    current: Any = model
    found: Any = None
    for part in path.split("__"):
        if current is None:
            raise FieldDoesNotExist(f"{path!r}: {part!r} follows a field that is not a relation")
        found = current._meta.pk if part == "pk" else current._meta.get_field(part)
        current = found.related_model if found.is_relation else None
    return found


def path_problem(declared: Authorship, path: str) -> str | None:
    """Why `path` of a declaration does not lead to a user, or None when it does."""
    try:
        found = model_field(declared.model, path)
    except FieldDoesNotExist as exc:
        return str(exc)
    if not found.is_relation or found.related_model is not get_user_model():
        return f"{path!r} is not a relation to the user model"
    return None


def undeclared_writers(model: type[models.Model], fields: Iterable[str]) -> list[tuple[type[models.Model], list[str]]]:
    """The models whose text `fields` of `model` show with nothing declaring who writes it, each with the
    relations to a user it has (which a declaration would most likely name)."""
    user_model = get_user_model()
    found = []
    for prefix in _text_prefixes(model, fields):
        holder = _holder(model, prefix)
        if authorship(holder) is None:
            users = [field.name for field in holder._meta.get_fields()
                     if field.is_relation and field.related_model is user_model
                     and (field.many_to_one or field.many_to_many or field.one_to_one) and field.concrete]
            found.append((holder, users))
    return found


def is_text(field: Any) -> bool:
    """A field whose values are somebody's words: text without choices, not a relation."""
    return (not field.is_relation and field.get_internal_type() in TEXT_TYPES
            and not getattr(field, "choices", None))


def _text_prefixes(model: type[models.Model], fields: Iterable[str]) -> dict[str, list[str]]:
    """The declared field paths that are text, by the relation path of the model that holds them ('' the
    model itself): `task__title` is text of the task the row's `task` leads to."""
    prefixes: dict[str, list[str]] = {}
    for name in fields:
        try:
            found = model_field(model, name)
        except FieldDoesNotExist:
            continue
        if is_text(found):
            prefix = name.rpartition("__")[0]
            prefixes.setdefault(prefix, []).append(name)
    return prefixes


def _joined(prefix: str, path: str) -> str:
    return f"{prefix}__{path}" if prefix else path


def _holder(model: type[models.Model], prefix: str) -> type[models.Model]:
    return model_field(model, prefix).related_model if prefix else model


def _writers(model: type[models.Model], carrying: dict[str, set[Any]]
             ) -> dict[str, dict[Any, tuple[Any, set[int] | None]]]:
    """For each relation path ('' the model itself) and each of its rows that carry text there: the pk of the
    object at that path and its writers' ids (None: nobody can tell who). One query for every path together."""
    columns: dict[str, int] = {}

    def column(path: str) -> int:
        return columns.setdefault(path, len(columns) + 1)  # after the row's own pk

    plan: list[tuple[str, int, list[int] | None]] = []
    for prefix in carrying:
        declared = authorship(_holder(model, prefix))
        if declared is not None and declared.site:
            continue  # the site's own text
        authors = [column(_joined(prefix, path)) for path in declared.by] if declared is not None else None
        plan.append((prefix, column(_joined(prefix, "pk")), authors))
    found: dict[str, dict[Any, tuple[Any, set[int] | None]]] = {prefix: {} for prefix, _, _ in plan}
    if not plan:
        return found
    pks = set().union(*(carrying[prefix] for prefix, _, _ in plan))
    # A many-to-many path gives a row once per related user: each adds its writer.
    for row in model._default_manager.filter(pk__in=pks).values_list("pk", *columns):
        for prefix, target, authors in plan:
            if row[0] not in carrying[prefix]:
                continue
            _, writers = found[prefix].setdefault(row[0], (row[target], set() if authors is not None else None))
            if authors is not None and writers is not None:
                writers.update(row[index] for index in authors if row[index] is not None)
    for by_row in found.values():
        for pk, (object_pk, writers) in list(by_row.items()):
            if writers is not None and not writers:  # nobody left to name (an author deleted): not the person
                by_row[pk] = (object_pk, None)
    return found


def others_text(person: Any, model: type[models.Model], rows: Sequence[tuple[Any, dict[str, Any] | None]],
                fields: Iterable[str], *, where: str) -> list[dict[str, Any]]:
    """The sources of text written by anyone but `person` among `rows` of `model` (each its pk and the values
    of `fields` it carries; None for values that are text of the row itself, such as the messages of the
    page that acted on it). One source per kind of object: who wrote it, which objects, and `where` it was
    read. Empty when every text is the person's own or the site's."""
    prefixes = _text_prefixes(model, fields)
    if any(values is None for _, values in rows):
        prefixes.setdefault("", [])
    carrying = {prefix: {pk for pk, values in rows
                         if values is None or any(isinstance(values.get(name), str) and values[name].strip()
                                                  for name in names)}
                for prefix, names in prefixes.items()}
    person_id = getattr(person, "pk", None)
    sources: dict[type[models.Model], tuple[set[int], bool, list[Any]]] = {}
    for prefix, by_row in _writers(model, {prefix: pks for prefix, pks in carrying.items() if pks}).items():
        holder = _holder(model, prefix)
        for object_pk, authors in by_row.values():
            if object_pk is None or (authors is not None and authors <= {person_id}):
                continue
            others, unknown, ids = sources.setdefault(holder, (set(), False, []))
            if authors is None:
                sources[holder] = (others, True, ids)
            else:
                others.update(authors - {person_id})
            if object_pk not in ids:
                ids.append(object_pk)
    if not sources:
        return []
    user_model = get_user_model()
    everyone = set().union(*(others for others, _, _ in sources.values()))
    usernames = dict(user_model._default_manager.filter(pk__in=everyone).values_list("pk", user_model.USERNAME_FIELD))
    return [_source(holder, others, unknown, ids, where, usernames)
            for holder, (others, unknown, ids) in sources.items()]


def _source(holder: type[models.Model], others: set[int], unknown: bool, ids: list[Any], where: str,
            usernames: dict[Any, Any]) -> dict[str, Any]:
    user_model = get_user_model()
    names = sorted(str(usernames[pk]) for pk in others if pk in usernames)
    if unknown or len(names) < len(others):
        names.append(SOMEONE)
    kind = "user name" if holder is user_model else str(holder._meta.verbose_name)
    return {"by": names, "kind": kind, "model": holder._meta.label_lower,
            "ids": ids[:IDS_SHOWN], "count": len(ids), "where": where}


def merge(*groups: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sources together, each said once (the first time it was read)."""
    seen: set[tuple[Any, ...]] = set()
    merged: list[dict[str, Any]] = []
    for group in groups:
        for source in group:
            key = (tuple(source.get("by") or ()), source.get("model"), tuple(source.get("ids") or ()),
                   source.get("where"))
            if key not in seen:
                seen.add(key)
                merged.append(source)
    return merged


def describe(sources: Sequence[dict[str, Any]]) -> str:
    """The sources in words, for the card that asks the person: `text by bob (a comment and a task, in
    tracker_comment_list)`."""
    people: list[str] = []
    kinds_where: dict[str, list[str]] = {}
    for source in sources:
        for name in source.get("by") or [SOMEONE]:
            if str(name) not in people:
                people.append(str(name))
        count = int(source.get("count") or len(source.get("ids") or ()) or 1)
        kind = str(source.get("kind") or "text")
        what = f"a {kind}" if count == 1 else f"{count} {kind}s"
        kinds = kinds_where.setdefault(str(source.get("where") or ""), [])
        if what not in kinds:
            kinds.append(what)
    places = [f"{_listed(kinds)}, in {where}" if where else _listed(kinds) for where, kinds in kinds_where.items()]
    return f"text by {_listed(people)} ({'; '.join(places)})"


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def unknown_text(where: str) -> dict[str, Any]:
    """A source of text whose writer nobody can tell: someone else's, as far as the person is concerned."""
    return {"by": [SOMEONE], "kind": "text", "model": "", "ids": [], "count": 1, "where": where}
