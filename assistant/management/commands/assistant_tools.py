"""`manage.py assistant_tools [--user NAME] [--spec NAME] [--profile NAME] [--json]`."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.tools import PROFILES, registry, tools_for
from assistant.tools.offer import offer, resolve_scope


class Command(BaseCommand):
    help = (
        "List the assistant's tools with their argument schemas: as a user would be offered them "
        "(--user), or every declared tool."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="username: list only what this user would be offered")
        parser.add_argument("--spec", help="assistant spec name (default: the SPEC setting)")
        parser.add_argument("--profile", choices=sorted(PROFILES), help="permission profile to apply")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scope = resolve_scope(options["spec"], options["profile"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["user"]:
            try:
                user = get_user_model()._default_manager.get_by_natural_key(options["user"])
            except get_user_model().DoesNotExist as exc:
                raise CommandError(f"No user named {options['user']!r}.") from exc
            tools = tools_for(user, options["spec"], scope.profile)
        else:
            tools = [offer(definition, scope) for definition in registry.all()]
        if options["json"]:
            payload = [{"name": t.name, "kind": t.kind, "confirm": t.confirm, "destructive": t.destructive,
                        "description": t.description, "parameters": t.parameters} for t in tools]
            self.stdout.write(json.dumps(payload, indent=2))
            return
        who = f"offered to {options['user']}" if options["user"] else "declared"
        self.stdout.write(f"{len(tools)} tool(s) {who}, profile {scope.profile.name}:\n")
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
