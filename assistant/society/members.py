"""Specs as members of a society (the seed's MemberSpec): each declares, in `ASSISTANT["SPECS"]`, beside its
`tools` and `permission_profile`:

- `role`: one line, what it is for — also what the specs that may ask it are told about it;
- `instructions`: its own system instructions (default: the INSTRUCTIONS setting);
- `model`: its preferred model chain (default: the MODEL setting; failover applies as for any chain);
- `limits`: its own `max_model_calls`, `max_tool_calls`, `max_wall_seconds`, `max_tokens_per_run`, each at
  most the global setting of the same name (which applies to whatever a spec leaves out);
- `delegates`: the specs it may hand work to. Its way back, when it cannot go on, is to whoever asked it;
- `plan_approval`: when a plan of its runs waits for the person's approval (`PLAN_APPROVALS`);
- `containment`: what its runs do before an effect once they read text someone else wrote (`CONTAINMENTS`);
- `handoff`: whether a member it asks alone may answer the person itself (`HANDOFFS`, docs/specs.md);
- `routing`: whether a request that plainly belongs to one of its members goes there without a model call
  (`ROUTINGS`, assistant/society/routing.py).

A project that declares no delegates has one assistant, as before; a spec with none of the new keys works
as it always did. `member_problems()` is what `manage.py check` reports (assistant.E030–E034, E036–E038,
W030; the delegation tools' names, E035, are checked beside it in `assistant/society/checks.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assistant.conf import assistant_settings
from assistant.tools.offer import PROFILES, PermissionProfile, ToolScope, resolve_scope
from assistant.tools.provenance import CONTAINMENTS

#: Every key a spec may declare ("profile" is the older spelling of "permission_profile").
SPEC_KEYS = frozenset({"tools", "permission_profile", "profile", "role", "instructions", "model", "limits",
                       "delegates", "plan_approval", "containment", "handoff", "routing"})
#: When a plan waits for the person's approval before anything of it is done (assistant/plans/): never; when
#: it has a destructive step (the default); always.
PLAN_APPROVALS = ("never", "when_destructive", "always")
#: Whether a member asked alone answers the person itself ("auto") or always answers the asking model ("never").
HANDOFFS = ("auto", "never")
#: Whether a plain request is handed to its member without a model call ("auto") or the model always decides.
ROUTINGS = ("auto", "never")
#: The limits a spec may set for itself, each named as the run keeps it (the global setting, lower-cased).
LIMIT_KEYS = ("max_model_calls", "max_tool_calls", "max_wall_seconds", "max_tokens_per_run")


@dataclass(frozen=True)
class Member:
    """One spec as a run under it uses it: everything resolved against the global settings."""

    name: str
    role: str
    instructions: str
    model: str
    limits: dict[str, float] = field(hash=False)
    delegates: tuple[str, ...]
    scope: ToolScope = field(hash=False)
    plan_approval: str = "when_destructive"
    containment: str = "approve"
    handoff: str = "auto"
    routing: str = "auto"

    @property
    def profile(self) -> PermissionProfile:
        return self.scope.profile


@dataclass(frozen=True)
class Problem:
    """Something wrong with the SPECS setting, as a system check reports it."""

    id: str
    message: str
    hint: str
    error: bool = True


def _declared(name: str) -> Mapping[str, Any]:
    specs = assistant_settings.SPECS
    if name in specs:
        spec = specs[name]
        return spec if isinstance(spec, Mapping) else {}
    if name == assistant_settings.SPEC:
        return {}
    raise ValueError(f"Unknown assistant spec {name!r}; known: {', '.join(sorted(specs)) or 'none'}.")


def _global_limit(key: str) -> float:
    return float(getattr(assistant_settings, key.upper()))


def member(name: str | None = None) -> Member:
    """The member `name` (default: the SPEC setting). Unknown names raise ValueError."""
    name = name or assistant_settings.SPEC
    declared = _declared(name)
    declared_limits = declared.get("limits")
    own_limits: Mapping[str, Any] = declared_limits if isinstance(declared_limits, Mapping) else {}
    limits = {}
    for key in LIMIT_KEYS:
        ceiling = _global_limit(key)
        value: Any = own_limits.get(key)
        limits[key] = min(float(value), ceiling) if _is_positive_number(value) else ceiling
    delegates = declared.get("delegates") or ()
    return Member(
        name=name,
        role=str(declared.get("role") or "").strip(),
        instructions=str(declared.get("instructions") or assistant_settings.INSTRUCTIONS),
        model=str(declared.get("model") or assistant_settings.MODEL),
        limits=limits,
        delegates=tuple(str(delegate) for delegate in delegates) if isinstance(delegates, list | tuple) else (),
        scope=resolve_scope(name),
        plan_approval=str(declared.get("plan_approval") or assistant_settings.PLAN_APPROVAL),
        containment=str(declared.get("containment") or assistant_settings.CONTAINMENT),
        handoff=str(declared.get("handoff") or assistant_settings.HANDOFF),
        routing=str(declared.get("routing") or assistant_settings.ROUTING),
    )


def members() -> dict[str, Member]:
    """Every spec there is: those SPECS declares, and the SPEC setting's even when it is not declared."""
    names = [*assistant_settings.SPECS]
    if assistant_settings.SPEC not in names:
        names.append(assistant_settings.SPEC)
    return {name: member(name) for name in names}


def _is_positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _is_wider(delegate: PermissionProfile, delegator: PermissionProfile) -> bool:
    """Would the delegate do on its own what the delegating spec would not (write, or skip a question)?"""
    return (
        (delegate.allows_writes and not delegator.allows_writes)
        or (delegator.honours_declared_confirm and not delegate.honours_declared_confirm)
        or (delegator.confirms_destructive and not delegate.confirms_destructive)
    )


def _shape_problems(name: str, spec: Any) -> list[Problem]:
    where = f"SPECS[{name!r}]"
    if not isinstance(spec, Mapping):
        return [Problem("assistant.E030", f"{where} must be a dict of the spec's keys, not {type(spec).__name__}.",
                        "Declare it as {'tools': '__all__', 'permission_profile': 'standard', ...}.")]
    problems = []
    unknown = sorted(str(key) for key in set(spec) - SPEC_KEYS)
    if unknown:
        problems.append(Problem("assistant.E030", f"{where} has unknown key(s): {', '.join(unknown)}.",
                                f"A spec's keys are: {', '.join(sorted(SPEC_KEYS))}."))
    for key in ("role", "instructions", "model"):
        if key in spec and not isinstance(spec[key], str):
            problems.append(Problem("assistant.E030", f"{where}[{key!r}] must be a string.",
                                    "Write it as text (the role in one line)."))
    if "plan_approval" in spec and spec["plan_approval"] not in PLAN_APPROVALS:
        problems.append(Problem("assistant.E036", f"{where}['plan_approval'] is {spec['plan_approval']!r}.",
                                f"Choose one of: {', '.join(PLAN_APPROVALS)} (when_destructive by default)."))
    if "containment" in spec and spec["containment"] not in CONTAINMENTS:
        problems.append(Problem("assistant.E037", f"{where}['containment'] is {spec['containment']!r}.",
                                f"Choose one of: {', '.join(CONTAINMENTS)} (approve by default)."))
    for key, choices in (("handoff", HANDOFFS), ("routing", ROUTINGS)):
        if key in spec and spec[key] not in choices:
            problems.append(Problem("assistant.E038", f"{where}[{key!r}] is {spec[key]!r}.",
                                    f"Choose one of: {', '.join(choices)} ({choices[0]} by default)."))
    delegates = spec.get("delegates", [])
    if not isinstance(delegates, list | tuple) or not all(isinstance(item, str) for item in delegates):
        problems.append(Problem("assistant.E030", f"{where}['delegates'] must be a list of spec names.",
                                "For example 'delegates': ['reader', 'clerk']."))
    limits = spec.get("limits", {})
    if not isinstance(limits, Mapping):
        problems.append(Problem("assistant.E034", f"{where}['limits'] must be a dict.",
                                f"Its keys are: {', '.join(LIMIT_KEYS)}."))
        return problems
    for key, value in limits.items():
        if key not in LIMIT_KEYS:
            problems.append(Problem("assistant.E034", f"{where}['limits'] has the unknown limit {key!r}.",
                                    f"A spec may set: {', '.join(LIMIT_KEYS)}."))
        elif not _is_positive_number(value):
            problems.append(Problem("assistant.E034", f"{where}['limits'][{key!r}] must be a positive number.",
                                    "Leave it out to use the global setting."))
        elif value > _global_limit(key):
            problems.append(Problem(
                "assistant.E034",
                f"{where}['limits'][{key!r}] is {value}, above the global {key.upper()} ({_global_limit(key):g}).",
                f"A spec's own limits are within the global ones: lower it, or raise {key.upper()}.",
            ))
    return problems


def _cycles(graph: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """Each delegation cycle once, as the path that closes it (["a", "b", "a"])."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(path: list[str]) -> None:
        for delegate in graph.get(path[-1], ()):
            if delegate in path:
                cycle = [*path[path.index(delegate):], delegate]
                if (key := frozenset(cycle)) not in seen:
                    seen.add(key)
                    found.append(cycle)
            elif delegate in graph:
                walk([*path, delegate])

    for start in graph:
        walk([start])
    return found


def member_problems() -> list[Problem]:
    """Everything wrong with how the specs are declared and who may ask whom."""
    specs = assistant_settings.SPECS
    if not isinstance(specs, Mapping):
        return [Problem("assistant.E030", "The SPECS setting must be a dict of spec names to specs.",
                        "For example {'reader': {'tools': '__all__', 'permission_profile': 'restricted'}}.")]
    problems = [problem for name, spec in specs.items() for problem in _shape_problems(name, spec)]
    for key, choices in (("HANDOFF", HANDOFFS), ("ROUTING", ROUTINGS)):
        if getattr(assistant_settings, key) not in choices:
            problems.append(Problem("assistant.E038", f"{key} is {getattr(assistant_settings, key)!r}.",
                                    f"Choose one of: {', '.join(choices)} ({choices[0]} by default)."))
    known = {*specs, assistant_settings.SPEC}
    graph: dict[str, tuple[str, ...]] = {}
    for name, spec in specs.items():
        delegates = spec.get("delegates") if isinstance(spec, Mapping) else None
        if isinstance(delegates, list | tuple):
            graph[name] = tuple(str(item) for item in delegates)
    for name, delegates in graph.items():
        for delegate in delegates:
            if delegate not in known:
                problems.append(Problem(
                    "assistant.E031", f"SPECS[{name!r}] delegates to {delegate!r}, which is not a spec.",
                    f"Declare SPECS[{delegate!r}], or remove it from the delegates. Known: {', '.join(sorted(known))}.",
                ))
    for cycle in _cycles(graph):
        problems.append(Problem(
            "assistant.E032", f"The specs can hand work round in a circle: {' → '.join(cycle)}.",
            "A member's way back is to whoever asked it; remove one of these delegates.",
        ))
    problems.extend(_width_problems(graph, known))
    problems.extend(_role_problems(graph, known))
    return problems


def _width_problems(graph: dict[str, tuple[str, ...]], known: set[str]) -> list[Problem]:
    problems = []
    for name, delegates in graph.items():
        try:
            delegator = resolve_scope(name).profile
        except ValueError:
            continue  # an unknown permission profile is assistant.E015's
        for delegate in delegates:
            if delegate not in known:
                continue
            try:
                profile = resolve_scope(delegate).profile
            except ValueError:
                continue
            if _is_wider(profile, delegator):
                problems.append(Problem(
                    "assistant.E033",
                    f"SPECS[{name!r}] ({delegator.name}) delegates to {delegate!r} ({profile.name}), which may do "
                    "more on its own than the spec asking it.",
                    f"Give {delegate!r} a profile no wider than {delegator.name!r} "
                    f"(profiles from narrow to wide: {', '.join(PROFILES)}), or widen {name!r}.",
                ))
    return problems


def _role_problems(graph: dict[str, tuple[str, ...]], known: set[str]) -> list[Problem]:
    askers: dict[str, list[str]] = {}
    for name, delegates in graph.items():
        for delegate in delegates:
            askers.setdefault(delegate, []).append(name)
    return [
        Problem(
            "assistant.W030", f"{delegate!r} declares no role, and {', '.join(map(repr, names))} may ask it.",
            f"Add SPECS[{delegate!r}]['role']: one line saying what it is for; the model that may ask it reads "
            "nothing else about it.", error=False,
        )
        for delegate, names in askers.items()
        if delegate in known and not str(_declared(delegate).get("role") or "").strip()
    ]
