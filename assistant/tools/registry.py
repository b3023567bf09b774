"""The registry of declared tools, like the admin's site registry: lookup by name, loud duplicates.

Each app's `assistant_tools` module is imported at start-up (`autodiscover`). View tools are bound to
the named URL pattern that routes to them the first time they are needed, per URLconf.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.signals import setting_changed
from django.urls import Resolver404, ResolverMatch, URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RoutePattern
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from assistant.tools.declarations import ReadTool, ViewTool


#: Where `@tool` records a view's tool on the view (assistant/tools/declarations.py), read back here.
ATTRIBUTE = "assistant_tool"


class AlreadyRegistered(Exception):
    """Two tools were declared with the same name."""


class NotRegistered(Exception):
    """No tool has that name."""


@dataclass(frozen=True)
class Binding:
    """Where a view tool lives in the URLconf (the name to reverse, its kwargs' converters) and the
    arguments derived from it; `problem` says why the tool cannot be offered, if it cannot."""

    url_name: str
    converters: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    unsupported: tuple[str, ...] = ()
    problem: str | None = None
    guarded: bool = False


def _pattern_converters(pattern: Any) -> dict[str, Any]:
    if isinstance(pattern, RoutePattern):
        return dict(pattern.converters)
    # Regex patterns: named groups only, validated as strings by the resolver itself.
    regex = getattr(pattern, "regex", None)
    return {name: _RegexGroup() for name in (regex.groupindex if regex is not None else {})}


class _RegexGroup:
    regex = "[^/]+"


def _walk(
    patterns: list[Any], namespaces: list[str], converters: dict[str, Any]
) -> Iterator[tuple[Any, str | None, dict[str, Any]]]:
    for entry in patterns:
        found = {**converters, **_pattern_converters(entry.pattern)}
        if isinstance(entry, URLResolver):
            inner = [*namespaces, entry.namespace] if entry.namespace else namespaces
            yield from _walk(entry.url_patterns, inner, found)
        elif isinstance(entry, URLPattern):
            name = ":".join([*namespaces, entry.name]) if entry.name else None
            yield entry.callback, name, found


def _declared_on(callback: Any) -> Any:
    view_class = getattr(callback, "view_class", None)
    if view_class is not None:
        # vars(), not getattr(): a subclass of a tool view is a different view, not the same tool.
        return vars(view_class).get(ATTRIBUTE)
    # Decorators applied before @tool (or around it, without copying attributes) hide it: unwrap.
    current = callback
    while current is not None:
        found = getattr(current, ATTRIBUTE, None)
        if found is not None:
            return found
        current = getattr(current, "__wrapped__", None)
    return None


class ToolRegistry:
    """All declared tools by name. Thread-safe for reads; registration happens at import time."""

    def __init__(self) -> None:
        self._tools: dict[str, ViewTool | ReadTool] = {}
        self._bindings: dict[str, dict[int, Binding | None]] = {}
        self._lock = threading.Lock()

    def register(self, definition: ViewTool | ReadTool) -> None:
        with self._lock:
            existing = self._tools.get(definition.name)
            if existing is not None and existing is not definition:
                raise AlreadyRegistered(
                    f"An assistant tool named {definition.name!r} is already registered "
                    f"({_where(existing)}); give one of them another name=."
                )
            self._tools[definition.name] = definition
            self._bindings.clear()

    def unregister(self, name: str) -> None:
        with self._lock:
            if name not in self._tools:
                raise NotRegistered(f"No assistant tool named {name!r} is registered.")
            del self._tools[name]
            self._bindings.clear()

    def get(self, name: str) -> ViewTool | ReadTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def all(self) -> list[ViewTool | ReadTool]:
        return sorted(self._tools.values(), key=lambda definition: definition.name)

    def fingerprint(self) -> str:
        """A digest of what the declared tools tell a model (names, kinds, descriptions, fields, approval):
        processes whose code declares other tools have other fingerprints (see assistant/operations/health.py)."""
        declared = [[definition.name, definition.kind_of, definition.kind, definition.description,
                     definition.confirm, definition.destructive, definition.fields] for definition in self.all()]
        return hashlib.sha256(json.dumps(declared, default=str).encode()).hexdigest()[:16]

    def binding(self, definition: ViewTool) -> Binding | None:
        """The named URL pattern routing to this view in the current URLconf, or None if there is none."""
        urlconf = str(settings.ROOT_URLCONF)
        bindings = self._bindings.get(urlconf)
        if bindings is None:
            bindings = self._bind_all()
            self._bindings[urlconf] = bindings
        return bindings.get(id(definition))

    def _bind_all(self) -> dict[int, Binding | None]:
        found: dict[int, Binding | None] = {}
        for callback, url_name, converters in _walk(get_resolver().url_patterns, [], {}):
            definition = _declared_on(callback)
            if definition is None or url_name is None or id(definition) in found:
                continue
            found[id(definition)] = _bind(definition, url_name, converters, _guarded(callback))
        return found

    def clear_bindings(self) -> None:
        self._bindings.clear()

    @contextmanager
    def register_temporarily(self, *definitions: ViewTool | ReadTool) -> Iterator[ToolRegistry]:
        """For tests: register `definitions` (and anything declared inside the block) until it exits."""
        with self._lock:
            saved = dict(self._tools)
        try:
            for definition in definitions:
                self.register(definition)
            yield self
        finally:
            with self._lock:
                self._tools = saved
                self._bindings.clear()


def _guarded(callback: Any) -> bool:
    """Whether the routed view demands a signed-in user (login_required, or an access mixin)."""
    from django.contrib.auth.mixins import AccessMixin

    view_class = getattr(callback, "view_class", None)
    if view_class is not None:
        return issubclass(view_class, AccessMixin)
    # login_required / permission_required / user_passes_test leave no marker but their wrapper.
    current = callback
    while current is not None:
        code = getattr(current, "__code__", None)  # functools.wraps rewrites __qualname__, not the code's
        if code is not None and code.co_qualname.startswith("user_passes_test."):
            return True
        current = getattr(current, "__wrapped__", None)
    return False


def _as_url(converter: Any, value: Any) -> str:
    to_url = getattr(converter, "to_url", None)
    return str(to_url(value)) if to_url is not None else str(value)


def own_match(definition: ViewTool, binding: Binding, path: str, kwargs: dict[str, Any]) -> ResolverMatch | None:
    """How `path` (built from `binding` with `kwargs`, decoded as a request carries it) resolves, if it
    reaches this tool's own view under its own URL name with exactly those arguments; otherwise None.

    Overlapping patterns make the difference: a `<path:...>` argument can carry the address into an
    earlier pattern of another view, a broader pattern can shadow the tool's, and an address can split
    into other arguments than those it was built from.
    """
    try:
        match = resolve(path)
    except Resolver404:
        return None
    if _declared_on(match.func) is not definition or match.view_name != binding.url_name:
        return None
    for key, value in kwargs.items():
        converter = binding.converters.get(key)
        if key not in match.kwargs or _as_url(converter, match.kwargs[key]) != _as_url(converter, value):
            return None
    return match


def _bind(definition: ViewTool, url_name: str, converters: dict[str, Any], guarded: bool) -> Binding:
    try:
        derived, annotations = definition.derive_schema(converters)
    except Exception as exc:  # a broken form class must not take the other tools down with it
        return Binding(url_name, converters, problem=f"its arguments could not be derived: {exc}", guarded=guarded)
    problem = None
    missing = [entry for entry in derived.unsupported if entry.endswith(", required)")]
    if missing:
        problem = f"required argument(s) with no JSON form: {', '.join(missing)}"
    return Binding(
        url_name, converters, derived.as_json_schema(), annotations, tuple(derived.unsupported), problem, guarded
    )


def _where(definition: Any) -> str:
    target = getattr(definition, "view", None) or getattr(definition, "model", None)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"


registry = ToolRegistry()


def register_temporarily(*definitions: ViewTool | ReadTool) -> Any:
    """Context manager: tools declared in the block (or passed in) exist only inside it."""
    return registry.register_temporarily(*definitions)


def autodiscover() -> None:
    """Import every installed app's `assistant_tools` module, as the admin does for `admin`."""
    autodiscover_modules("assistant_tools")


def _urlconf_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "ROOT_URLCONF":
        registry.clear_bindings()


setting_changed.connect(_urlconf_changed)
