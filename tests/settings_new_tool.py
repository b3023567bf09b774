"""The suite's settings with one more app declaring one more tool (tests/newtool): the project's code after a
new `@tool` or `readable(...)` was added, for the processes started after that."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.newtool"]
