"""Demo users (and, as the tracker grows, their data) for `make run`. Idempotent."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

DEMO_USERS = [
    # username, password, is_staff
    ("alice", "alice-demo", False),
    ("bob", "bob-demo", False),
    ("staff", "staff-demo", True),
]


@transaction.atomic
def seed_demo() -> list[str]:
    """Create the demo users if missing (resetting their demo passwords); returns their usernames."""
    user_model = get_user_model()
    names = []
    for username, password, is_staff in DEMO_USERS:
        user, _ = user_model.objects.get_or_create(
            username=username, defaults={"email": f"{username}@example.com"}
        )
        user.is_staff = is_staff
        user.is_superuser = is_staff
        user.set_password(password)
        user.save()
        names.append(username)
    return names
