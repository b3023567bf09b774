"""`manage.py assistant_prune --older-than 90d [--dry-run]`: retention of the assistant's evidence by age."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.conversation.retention import InvalidAge, evidence_prune, parse_age


class Command(BaseCommand):
    help = (
        "Delete runs (with their steps and messages), chats left empty, and memories created before a cut-off. "
        "Active runs are never touched. Says what it deleted, per kind; --dry-run only says what would go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", dest="older_than", metavar="AGE",
                            help="how old rows must be to go: 90d (days), 12w (weeks) or 48h (hours); required")
        parser.add_argument("--dry-run", action="store_true", help="count what would go and delete nothing")

    def handle(self, *args: Any, older_than: str | None = None, dry_run: bool = False, **options: Any) -> None:
        try:
            age = parse_age(older_than)
        except InvalidAge as error:
            raise CommandError(str(error)) from None
        pruned = evidence_prune(older_than=age.delta, dry_run=dry_run)
        listed = ", ".join(f"{count} {singular if count == 1 else plural}"
                           for count, singular, plural in pruned.counts())
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(f"{verb} {listed} (created before {pruned.cutoff:%Y-%m-%d %H:%M %Z}, older than "
                          f"{age.words}; active runs are kept).")
