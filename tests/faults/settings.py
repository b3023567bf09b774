"""Settings of the fault suite's own processes (its worker and daphne): the suite's settings with the
workers' clocks shortened, so a lost lease or a lost queue message is noticed in about a second
instead of ten or thirty."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import ASSISTANT

ASSISTANT = {**ASSISTANT, "LEASE_SECONDS": 3.0, "SWEEP_INTERVAL_SECONDS": 0.5, "QUEUED_GRACE_SECONDS": 2.0}
