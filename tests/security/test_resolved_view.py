"""A tool call runs the tool's own view with the model's own arguments, or nothing (issue 9, item 5).

The executor builds the tool's address from the model's arguments and resolves it as the browser's
request would be. tests/testapp/urls.py overlaps patterns on purpose: an argument may carry the tool's
address into another view's pattern, a broader pattern may shadow the tool's, and an address may split
into other arguments than it was built from. Each view records which view ran, with what.
"""

from __future__ import annotations

from typing import Any

import pytest

from assistant.tools import execute_tool
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("test_overlap_note", {"name": "7/other"}, id="argument-reaches-another-view"),
        pytest.param("test_shadowed_note", {}, id="broader-pattern-shadows-the-tool"),
        pytest.param("test_pair_note", {"left": "a", "right": "b/c"}, id="address-splits-into-other-arguments"),
    ],
)
def test_an_address_that_resolves_elsewhere_is_invalid_and_runs_nothing(
    alice: Any, name: str, arguments: dict[str, Any]
) -> None:
    outcome = execute_tool(alice, name, arguments)

    assert (outcome.status, outcome.took_effect) == ("invalid", False)
    assert "address" in outcome.reason
    assert list(Effect.objects.values_list("label", flat=True)) == []


def test_the_tools_own_address_still_runs_with_the_models_arguments(alice: Any) -> None:
    assert execute_tool(alice, "test_overlap_note", {"name": "plans/2030"}).status == "done"
    assert execute_tool(alice, "test_pair_note", {"left": "a/b", "right": "c"}).status == "done"
    assert execute_tool(alice, "test_overlap_note", {"name": "50% off"}).status == "done"

    assert sorted(Effect.objects.values_list("label", flat=True)) == [
        "note:50% off", "note:plans/2030", "pair:a/b|c",
    ]
