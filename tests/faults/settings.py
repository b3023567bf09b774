"""Settings of the fault suite's own processes (its worker and daphne): the suite's settings with the
workers' clocks shortened, so a lost lease or a lost queue message is noticed in about a second
instead of ten or thirty."""

from __future__ import annotations

import os
from pathlib import Path

from tests.settings import *  # noqa: F403
from tests.settings import ASSISTANT

ASSISTANT = {**ASSISTANT, "LEASE_SECONDS": 3.0, "SWEEP_INTERVAL_SECONDS": 0.5, "QUEUED_GRACE_SECONDS": 2.0}

# A run that asks a member (and one that asks that one), each with its own script beside the stack's
# (see Stack.script_for).
_SCRIPTS = Path(os.environ.get("ASSISTANT_MODEL", "scripted:script.json").removeprefix("scripted:")).parent
ASSISTANT["SPECS"] = {
    **ASSISTANT["SPECS"],
    # One level above: it hands the whole request to the asker, which may hand it on to the member (a handoff
    # two members deep).
    "fault-lead": {"tools": [], "permission_profile": "standard", "role": "Hands requests to the asker.",
                   "model": f"scripted:{_SCRIPTS / 'fault-lead.json'}", "delegates": ["fault-asker"]},
    "fault-asker": {"tools": ["test_record_effect"], "permission_profile": "standard", "role": "Asks the member.",
                    "model": f"scripted:{_SCRIPTS / 'fault-asker.json'}", "delegates": ["fault-member"]},
    "fault-member": {"tools": ["test_record_effect", "test_slow_effect"], "permission_profile": "standard",
                     "role": "Records effects, some slowly.", "model": f"scripted:{_SCRIPTS / 'fault-member.json'}"},
    # A request only its member's one tool fits is routed there with no model call: the run becomes the member's.
    "fault-router": {"tools": [], "permission_profile": "standard", "role": "Routes requests to the slow member.",
                     "model": f"scripted:{_SCRIPTS / 'fault-router.json'}", "delegates": ["fault-slow"]},
    "fault-slow": {"tools": ["test_slow_effect"], "permission_profile": "standard", "role": "Records effects slowly.",
                   "model": f"scripted:{_SCRIPTS / 'fault-slow.json'}"},
}
