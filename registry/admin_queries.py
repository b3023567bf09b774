"""What an admin list of the assistant's records takes from its address, and nothing else.

Django's admin lets a list be filtered by any lookup on any of the model's own fields (`?reply__regex=…`),
whatever its filters offer. Whoever may view the list can then ask it yes-or-no questions about every
column, one request at a time, including columns no page shows. So these lists take only the lookups
they name (`allowed_lookups`: their filters' own parameters, their date drill-down, and what the pages
linking to them use), and refuse any other with a 400 that says so.

The values are checked before they reach the database, which would otherwise fail (a 500) on some of
them: text with NUL (PostgreSQL text cannot hold it), values or searches too long to be anything but an
attack, a date drill-down outside the calendar. The page says what it could not take. A value the list's
filters cannot read (a date that is no date, a page past the end) is said in a message over the list as
it is without its filters, where Django alone redirects without a word.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ERROR_FLAG, IGNORED_PARAMS, PAGE_VAR, SEARCH_VAR
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.text import smart_split

# Django's own logger for refused admin lookups: a probe shows where a site's security warnings go.
security_logger = logging.getLogger("django.security.DisallowedModelAdminLookup")

#: Parameters of Django's list pages that are not lookups: ordering, search, page, "show all", facets,
#: pop-ups, and the flag Django sets after a bad filter.
LIST_PARAMETERS = frozenset({*IGNORED_PARAMS, PAGE_VAR, ERROR_FLAG})
#: Longer than any value a filter or a link of these lists carries (a run's error text, linked from the
#: dashboard, is the longest): anything past it is refused before the database works on it.
MAX_VALUE_CHARS = 10_000
#: A search is split into words, each matched against every searched field: bounded, so that a search
#: box cannot be made to build a query of thousands of conditions.
MAX_SEARCH_CHARS = 500
MAX_SEARCH_WORDS = 20
# The date drill-down's bounds: Django adds a year (or a day) to the one chosen to make its range.
_DATE_PARTS = {"year": (1, 9998), "month": (1, 12), "day": (1, 31)}


class _Unreadable(Exception):
    """A value the list's filters could not read (Django's IncorrectLookupParameters), with why."""


class StrictAdminQueryMixin:
    """For a ModelAdmin: its list takes only `allowed_lookups` (plus its date drill-down) and values the
    database can take; anything else is refused with a page that says what (see the module's notes). Its
    record pages take an empty `_to_field` as none."""

    #: The lookups the list may be filtered by: its filters' parameters and those that links to it use.
    allowed_lookups: frozenset[str] = frozenset()

    def lookups_allowed(self) -> frozenset[str]:
        hierarchy = getattr(self, "date_hierarchy", None)
        parts = {f"{hierarchy}__{part}" for part in _DATE_PARTS} if hierarchy else set()
        return self.allowed_lookups | parts

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # Never Django's default: it allows any lookup on a local field, a question about any column.
        return lookup in self.lookups_allowed()

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        problems = self.list_query_problems(request)
        if problems:
            return self._refused(request, problems)
        try:
            return super().changelist_view(request, extra_context)  # type: ignore[misc]
        except _Unreadable as unreadable:
            messages.warning(request, f"This list could not be filtered as asked ({unreadable}); it is shown "
                                      "without its filters.")
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        try:
            return super().get_changelist_instance(request)  # type: ignore[misc]
        except IncorrectLookupParameters as error:
            if set(request.GET) - {ERROR_FLAG}:
                raise _Unreadable(_reason(error)) from error
            raise  # the bare list itself cannot be shown: Django's own page says so

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        # A record page's `?_to_field=` with nothing in it: Django looks up a field named "" (a 500), where
        # it means what no `_to_field` means, the primary key.
        return super().get_object(request, object_id, from_field or None)  # type: ignore[misc]

    def list_query_problems(self, request: HttpRequest) -> list[str]:
        """What this list cannot take from the request's query string, in words; empty when it can."""
        problems: list[str] = []
        refused: list[str] = []
        allowed = self.lookups_allowed()
        hierarchy = getattr(self, "date_hierarchy", None)
        for name, values in request.GET.lists():
            if "\x00" in name or len(name) > 200:
                problems.append("A parameter's name is not one this list knows.")
                continue
            if name not in LIST_PARAMETERS and name not in allowed:
                refused.append(name)
                continue
            for value in values:
                if "\x00" in value:
                    problems.append(f"“{name}” contains a NUL character, which no stored text can hold.")
                elif len(value) > MAX_VALUE_CHARS:
                    problems.append(f"“{name}” is longer than {MAX_VALUE_CHARS:,} characters.")
                elif name == SEARCH_VAR:
                    problems.extend(_search_problems(value))
                elif hierarchy and name.startswith(f"{hierarchy}__") and name[len(hierarchy) + 2:] in _DATE_PARTS:
                    problems.extend(_date_part_problems(name, name[len(hierarchy) + 2:], value))
        if refused:
            # The names only: a refused value may be a guess at a secret.
            security_logger.warning("Filtering %s by %s not allowed", request.path, ", ".join(sorted(refused)))
            problems[:0] = [f"This list cannot be filtered by “{name}”." for name in sorted(refused)]
        return problems

    def _refused(self, request: HttpRequest, problems: list[str]) -> HttpResponse:
        opts = self.model._meta  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request),  # type: ignore[attr-defined]
            "title": f"The {opts.verbose_name_plural} cannot be listed as asked",
            "opts": opts,
            "problems": problems,
            "filters": sorted(self.lookups_allowed()),
            "list_url": request.path,
        }
        return TemplateResponse(request, "admin/registry/refused_query.html", context, status=400)


def _reason(error: IncorrectLookupParameters) -> str:
    text = " ".join(str(part) for part in error.args) or "a value it cannot read"
    return text if len(text) <= 200 else text[:199] + "…"


def _search_problems(value: str) -> list[str]:
    if len(value) > MAX_SEARCH_CHARS:
        return [f"A search is at most {MAX_SEARCH_CHARS} characters; this one has {len(value):,}."]
    if sum(1 for _ in smart_split(value)) > MAX_SEARCH_WORDS:
        return [f"A search is at most {MAX_SEARCH_WORDS} words."]
    return []


def _date_part_problems(name: str, part: str, value: str) -> list[str]:
    low, high = _DATE_PARTS[part]
    if not (len(value) <= 4 and value.isascii() and value.isdigit() and low <= int(value) <= high):
        return [f"“{name}” must be a whole number from {low} to {high}."]
    return []
