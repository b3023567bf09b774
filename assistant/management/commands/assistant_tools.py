"""`manage.py assistant_tools [--user NAME] [--spec NAME] [--profile NAME] [--json]`."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.plans.offer import PlanTool
from assistant.runs.lifecycle import run_config
from assistant.society.members import member
from assistant.society.offer import delegation_tools
from assistant.tools import PROFILES, registry, tools_for
from assistant.tools.offer import offer, resolve_scope


def _run_tools(user: Any, config: dict[str, Any]) -> list[Any]:
    seat = member(config["spec"])
    asked = delegation_tools(owner=user, asking=seat) if seat.delegates else []
    return [*asked, *([PlanTool()] if config.get("plans", True) else [])]


class Command(BaseCommand):
    help = (
        "List the assistant's tools with their argument schemas: as a run under a spec would offer them "
        "to a user (--user), or every declared tool."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="username: list only what this user would be offered")
        parser.add_argument("--spec", help="assistant spec name (default: the SPEC setting)")
        parser.add_argument("--profile", choices=sorted(PROFILES),
                            help="permission profile to try; it may narrow the spec's own, never widen it")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args: Any, **options: Any) -> None:
        # The spec and profile a run queued now would keep, resolved exactly as the run resolves them.
        try:
            resolve_scope(options["spec"])
            config = run_config(spec=options["spec"])
            scope = resolve_scope(config["spec"], options["profile"] or config["permission_profile"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["user"]:
            try:
                user = get_user_model()._default_manager.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist as exc:
                raise CommandError(f"No user named {options['user']!r}.") from exc
            # Beside the spec's tools, what a run under it is offered of its own: a tool per member it may ask,
            # and the planning tool.
            tools = [*tools_for(user, config["spec"], scope.profile), *_run_tools(user, config)]
        else:
            tools = [offer(definition, scope) for definition in registry.all()]
        if options["json"]:
            payload = [{"name": t.name, "kind": t.kind, "confirm": t.confirm, "destructive": t.destructive,
                        "description": t.description, "parameters": t.parameters} for t in tools]
            self.stdout.write(json.dumps(payload, indent=2))
            return
        who = f"offered to {options['user']}" if options["user"] else "declared"
        capped = ""
        if options["profile"] and options["profile"] != scope.profile.name:
            capped = f" (--profile {options['profile']} cannot widen the spec's {scope.profile.name})"
        self.stdout.write(f"{len(tools)} tool(s) {who} by spec {config['spec']}, profile {scope.profile.name}"
                          f"{capped}:\n")
        for t in tools:
            flags = [t.kind] + (["destructive"] if t.destructive else []) + (["asks first"] if t.confirm else [])
            self.stdout.write(self.style.SUCCESS(t.name) + f"  ({', '.join(flags)})")
            self.stdout.write(f"    {t.description}")
            properties = t.parameters.get("properties", {})
            required = set(t.parameters.get("required", []))
            for name, prop in properties.items():
                kind = prop.get("type", "any")
                kind = "|".join(kind) if isinstance(kind, list) else kind
                mark = "*" if name in required else " "
                self.stdout.write(f"    {mark} {name}: {kind}  {prop.get('description', '')}")
            self.stdout.write("")
