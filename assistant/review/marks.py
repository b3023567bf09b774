"""How an outcome reads on a run's page: a mark and words a reviewer tells apart at a glance."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Effect:
    """What came of a step (or a plan step), as a mark and words (`key` is its CSS hook, `effect-<key>`)."""

    key: str
    mark: str
    words: str
