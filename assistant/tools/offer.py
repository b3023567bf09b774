"""Which tools a user is offered under a spec and a permission profile, and whether each pauses first.

The same decision is made again by the executor on every call: what the model names is never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import FieldDoesNotExist

from assistant.conf import assistant_settings
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.provenance import model_field
from assistant.tools.reads import read_parameters
from assistant.tools.registry import registry


@dataclass(frozen=True)
class PermissionProfile:
    """How much the assistant may do on its own.

    `restricted`: read tools only. `standard`: reads and writes; tools declared `confirm=True` and
    destructive tools wait for the user's approval. `trusted`: writes run without asking, except
    destructive ones.
    """

    name: str
    allows_writes: bool
    honours_declared_confirm: bool
    confirms_destructive: bool = True

    def allows(self, definition: ViewTool | ReadTool) -> bool:
        return definition.kind == "read" or self.allows_writes

    def needs_confirmation(self, definition: ViewTool | ReadTool) -> bool:
        return (self.honours_declared_confirm and bool(definition.confirm)) or (
            self.confirms_destructive and bool(definition.destructive)
        )


PROFILES: dict[str, PermissionProfile] = {
    "restricted": PermissionProfile("restricted", allows_writes=False, honours_declared_confirm=True),
    "standard": PermissionProfile("standard", allows_writes=True, honours_declared_confirm=True),
    "trusted": PermissionProfile("trusted", allows_writes=True, honours_declared_confirm=False),
}


@dataclass(frozen=True)
class Tool:
    """A tool as offered to one user: what the model provider needs, plus whether it pauses first."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: str
    destructive: bool
    confirm: bool
    definition: ViewTool | ReadTool = field(repr=False, compare=False)


@dataclass(frozen=True)
class ToolScope:
    """The tool names a spec may use (None: all declared tools) and its permission profile."""

    names: frozenset[str] | None
    profile: PermissionProfile


def _attr(spec: Any, *names: str) -> Any:
    for name in names:
        value = spec.get(name) if isinstance(spec, Mapping) else getattr(spec, name, None)
        if value is not None:
            return value
    return None


def _profile(value: str | PermissionProfile) -> PermissionProfile:
    if isinstance(value, PermissionProfile):
        return value
    if value not in PROFILES:
        raise ValueError(f"Unknown permission profile {value!r}; known: {', '.join(PROFILES)}.")
    return PROFILES[value]


def narrowest(first: PermissionProfile, second: PermissionProfile) -> PermissionProfile:
    """The profile that allows only what both allow and asks first whenever either would."""
    rules = (
        first.allows_writes and second.allows_writes,
        first.honours_declared_confirm or second.honours_declared_confirm,
        first.confirms_destructive or second.confirms_destructive,
    )
    for candidate in (first, second, *PROFILES.values()):
        if (candidate.allows_writes, candidate.honours_declared_confirm, candidate.confirms_destructive) == rules:
            return candidate
    return PermissionProfile(f"{first.name}+{second.name}", *rules)


def resolve_scope(spec: Any = None, profile: str | PermissionProfile | None = None) -> ToolScope:
    """The scope for a spec (None, a name from the SPECS setting, or an object/dict with `tools` and
    `permission_profile`) under an optional explicit profile. Unknown names raise ValueError.

    A spec that declares a profile gets that profile: an explicit `profile` may narrow it, never widen
    it. For a spec that declares none, the explicit profile applies, else the PERMISSION_PROFILE setting.
    """
    if spec is None or isinstance(spec, str):
        name = spec or assistant_settings.SPEC
        specs = assistant_settings.SPECS
        if name in specs:
            spec = specs[name]
        elif name == assistant_settings.SPEC:
            spec = {}
        else:
            raise ValueError(f"Unknown assistant spec {name!r}; known: {', '.join(sorted(specs)) or 'none'}.")
    tools = _attr(spec, "tools")
    names = None if tools in (None, "__all__") else frozenset(tools)
    declared = _attr(spec, "permission_profile", "profile")
    asked = _profile(profile) if profile is not None else None
    if declared is None:
        return ToolScope(names, asked or _profile(assistant_settings.PERMISSION_PROFILE))
    ceiling = _profile(declared)
    return ToolScope(names, ceiling if asked is None else narrowest(ceiling, asked))


def _permitted(user: Any, permission: Any) -> bool:
    if permission is None:
        return True
    if isinstance(permission, str):
        return bool(user.has_perm(permission))
    if callable(permission):
        return bool(permission(user))
    return bool(user.has_perms(list(permission)))


def refusal(user: Any, definition: ViewTool | ReadTool, scope: ToolScope) -> str | None:
    """Why `user` may not use this tool under `scope`, or None when they may."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return "tools act as a signed-in, active user"
    if scope.names is not None and definition.name not in scope.names:
        return f"{definition.name} is not among this assistant's tools"
    if not scope.profile.allows(definition):
        return f"the {scope.profile.name} profile allows read tools only"
    if isinstance(definition, ReadTool):
        if definition.scope is None:
            return f"{definition.name} declares no scope, so nothing is readable through it"
        try:
            for name in [*definition.fields, *definition.search_fields]:
                model_field(definition.model, name)
        except FieldDoesNotExist as exc:
            return f"{definition.name} is misdeclared: {exc}"
    else:
        binding = registry.binding(definition)
        if binding is None:
            return f"{definition.name} is not routed by any named URL pattern"
        if binding.problem:
            return f"{definition.name} cannot be offered: {binding.problem}"
    if not _permitted(user, definition.permission):
        return f"you do not have the permission {definition.name} needs"
    return None


def parameters_of(definition: ViewTool | ReadTool) -> dict[str, Any]:
    if isinstance(definition, ReadTool):
        return read_parameters(definition)
    binding = registry.binding(definition)
    return binding.parameters if binding is not None else {}


def offer(definition: ViewTool | ReadTool, scope: ToolScope) -> Tool:
    return Tool(
        name=definition.name,
        description=definition.description,
        parameters=parameters_of(definition),
        kind=definition.kind,
        destructive=bool(definition.destructive),
        confirm=scope.profile.needs_confirmation(definition),
        definition=definition,
    )


def tool_for(user: Any, name: str, spec: Any = None, profile: str | PermissionProfile | None = None) -> Tool | None:
    """The one tool `name` as `tools_for` would offer it to `user`, or None when it would not."""
    scope = resolve_scope(spec, profile)
    definition = registry.get(name)
    if definition is None or refusal(user, definition, scope) is not None:
        return None
    return offer(definition, scope)


def tools_for(user: Any, spec: Any = None, profile: str | PermissionProfile | None = None) -> list[Tool]:
    """The tools `user` may use under `spec` and `profile`, sorted by name; `.confirm` says which pause."""
    scope = resolve_scope(spec, profile)
    return [offer(definition, scope) for definition in registry.all() if refusal(user, definition, scope) is None]
