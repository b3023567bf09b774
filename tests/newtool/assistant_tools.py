"""A tool the suite's code does not declare: a process started with `tests.settings_new_tool` runs the code
as it is after someone added this `readable(...)`, while a worker started before still runs the old."""

from __future__ import annotations

from assistant.tools import readable
from tests.testapp.models import Effect

readable(Effect, name="newtool_effect_list", fields=["id", "label"], scope=lambda user, rows: rows.filter(owner=user),
         description="List the effects your tools took (id, label).")
