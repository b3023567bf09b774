"""`manage.py assistant_token create --user U [--spec S] [--read-only] [--containment] [--name N] [--expires 30d]` and
`manage.py assistant_token revoke NAME_OR_ID --user U`: access tokens for scripts.

`create` prints the new token alone on its last line (`... | tail -n 1` takes it), and only then."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.mcp.tokens import (
    InvalidTokenRequest,
    TokenNotFound,
    expires_words,
    parse_duration,
    token_create,
    token_find,
    token_owner,
    token_revoke,
)


class Command(BaseCommand):
    help = "Create or revoke a person's access token for their own agent (the assistant's MCP endpoint)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,revoke}")
        create = actions.add_parser("create", help="make a token; its last line of output is the token alone")
        create.add_argument("--user", required=True, help="the username the token acts as")
        create.add_argument("--spec", help="the assistant spec it acts under (default: the SPEC setting)")
        create.add_argument("--read-only", action="store_true", dest="read_only",
                            help="the restricted profile (read tools only), whatever the spec says")
        create.add_argument("--containment", action="store_true",
                            help="hold each write for the person's approval after a call returned someone "
                                 "else's text (for MCP_CONTAINMENT_SECONDS)")
        create.add_argument("--name", help="the token's label (default: 'token <prefix>')")
        create.add_argument("--expires", metavar="DURATION", help="12h, 30d or 8w from now (default: never)")
        revoke = actions.add_parser("revoke", help="revoke a token by its id or name")
        revoke.add_argument("token", metavar="NAME_OR_ID")
        revoke.add_argument("--user", required=True, help="the username the token belongs to")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            if action == "create":
                self._create(**options)
            else:
                self._revoke(**options)
        except (InvalidTokenRequest, TokenNotFound) as error:
            raise CommandError(str(error)) from None

    def _create(self, *, user: str, spec: str | None, read_only: bool, name: str | None, expires: str | None,
                containment: bool = False, **options: Any) -> None:
        owner = token_owner(user)
        expires_in = parse_duration(expires) if expires is not None else None
        created = token_create(owner=owner, name=name, spec=spec, read_only=read_only, expires_in=expires_in,
                               containment=containment)
        token = created.token
        profile = "read-only" if token.read_only else "its spec's profile"
        if token.containment:
            profile += ", asking before writes after someone else's text"
        self.stdout.write(f"Created the token “{token.name}” (id {token.pk}) for {owner}: spec {token.spec}, "
                          f"{profile}, {expires_words(token.expires_at)}.")
        self.stdout.write("It is shown this once and stored only as a hash; keep it now:")
        self.stdout.write(created.secret)

    def _revoke(self, *, user: str, token: str, **options: Any) -> None:
        owner = token_owner(user)
        found = token_find(owner=owner, name_or_id=token)
        revoked, now = token_revoke(owner=owner, token_id=found.pk)
        if now:
            self.stdout.write(f"Revoked the token “{revoked.name}” (id {revoked.pk}) of {owner}.")
        else:
            self.stdout.write(f"The token “{revoked.name}” (id {revoked.pk}) of {owner} was already revoked "
                              f"({revoked.revoked_at:%Y-%m-%d %H:%M %Z}).")
