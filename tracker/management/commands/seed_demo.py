from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from tracker.demo import DEMO_USERS, seed_demo


class Command(BaseCommand):
    help = "Create the demo users and their data (safe to run again); prints the logins."

    def handle(self, *args: Any, **options: Any) -> None:
        seed_demo()
        for username, password, is_staff in DEMO_USERS:
            role = "staff, can open /admin/" if is_staff else "ordinary user"
            self.stdout.write(f"    {username:<6} / {password:<11} ({role})")
