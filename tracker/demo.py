"""Demo users and their tracker data for `make run`. Idempotent: running it again adds nothing twice."""

from __future__ import annotations

import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from tracker.models import Project, Task

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
    _seed_tracker()
    return names


# owner, project name, description, members, [(title, status, priority, due in days or None)]
DEMO_PROJECTS: list[tuple[str, str, str, list[str], list[tuple[str, str, int, int | None]]]] = [
    ("alice", "Home", "Chores and errands around the flat.", [], [
        ("Fix the kitchen tap", "todo", 3, 2),
        ("Book the boiler service", "doing", 2, 10),
        ("Sort the recycling", "done", 1, None),
    ]),
    ("alice", "Garden", "Spring planting.", [], [
        ("Buy tomato seedlings", "todo", 2, 5),
        ("Repair the fence", "todo", 1, None),
    ]),
    ("alice", "Family trip", "The summer trip, planned together with Bob.", ["bob"], [
        ("Choose the campsite", "doing", 3, 7),
        ("Pack the tent", "todo", 2, 20),
    ]),
    ("bob", "Website", "The band's new website.", [], [
        ("Draft the gig page", "todo", 2, 3),
        ("Pick a colour scheme", "done", 1, None),
    ]),
    ("bob", "Running", "Training for the autumn half marathon.", [], [
        ("Buy new shoes", "todo", 2, None),
        ("Long run on Sunday", "todo", 3, 4),
    ]),
]


def _seed_tracker() -> None:
    users = {user.username: user for user in get_user_model().objects.filter(username__in=["alice", "bob"])}
    today = timezone.localdate()
    for owner, name, description, members, tasks in DEMO_PROJECTS:
        project, _ = Project.objects.get_or_create(
            owner=users[owner], name=name, defaults={"description": description}
        )
        project.members.add(*(users[member] for member in members))
        for title, status, priority, due_in in tasks:
            defaults: dict[str, Any] = {
                "status": status, "priority": priority, "created_by": users[owner],
                "due_date": today + datetime.timedelta(days=due_in) if due_in is not None else None,
                "completed_at": timezone.now() if status == "done" else None,
            }
            Task.objects.get_or_create(project=project, title=title, defaults=defaults)
