"""The MCP endpoint as the person's own agent reaches it: the official MCP SDK's client over streamable HTTP,
against daphne serving the site (issue 21). Each test's data is committed, so daphne's requests see it.

What is held here: the offer is exactly `tools_for` under the token's spec and profile; a call acts as the
token's person through the panel's executor (their rows only, another person's ids answered like missing
ones, a read-only token never writes); a call the panel would ask about is not done without the person's
yes, through elicitation (taken once, a replay refused) or in their panel (after which the same call runs
once); a token that acts as nobody is refused; every call is a run of channel `mcp` in the admin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.test import Client as BrowserClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from assistant.mcp.tokens import token_create, token_revoke
from assistant.models import AgentMessage, AgentRun, AgentStep
from assistant.testing.sockets import connect, receive_until
from assistant.tools import tools_for
from tracker.models import Project, Task

pytestmark = pytest.mark.django_db(transaction=True)


def endpoint(port: int) -> str:
    return f"http://127.0.0.1:{port}/assistant/mcp/"


def agent(port: int, secret: str, work: Callable[[Client], Awaitable[Any]], **options: Any) -> Any:
    """Connect as the person's agent with `secret` (as Claude Desktop or Cursor would, by URL and header),
    do `work` with the connected client, and return what it returns."""

    async def session() -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        async with Client(streamable_http_client(endpoint(port), http_client=http), **options) as client:
            return await work(client)

    try:
        return asyncio.run(session())
    except BaseExceptionGroup as group:  # the client's task group wraps what went wrong: raise that
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def call(port: int, secret: str, name: str, arguments: dict[str, Any], **options: Any) -> types.CallToolResult:
    async def work(client: Client) -> types.CallToolResult:
        return await client.call_tool(name, arguments)

    return agent(port, secret, work, **options)


def listed(port: int, secret: str, **options: Any) -> dict[str, types.Tool]:
    async def work(client: Client) -> dict[str, types.Tool]:
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    return agent(port, secret, work, **options)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


def test_each_token_lists_exactly_its_persons_offer_under_its_spec_and_profile(port: int, alice: Any, bob: Any) -> None:
    everything = token_create(owner=alice, name="Claude", spec="default")
    reads_only = token_create(owner=bob, name="Cursor", spec="reader")
    read_only_of_all = token_create(owner=alice, name="Careful", spec="default", read_only=True)

    for made, person, profile in ((everything, alice, None), (reads_only, bob, None),
                                  (read_only_of_all, alice, "restricted")):
        tools = listed(port, made.secret)
        offer = {tool.name: tool for tool in tools_for(person, made.token.spec, profile)}
        assert set(tools) == set(offer), made.token.name
        for name, tool in tools.items():
            assert tool.description == offer[name].description
            assert tool.annotations is not None and tool.annotations.read_only_hint is (offer[name].kind == "read")
            if offer[name].kind != "read":
                assert tool.annotations.destructive_hint is offer[name].destructive
    # Two specs, two different offers: the reader's has no write at all.
    assert "tracker_project_delete" in listed(port, everything.secret)
    assert not any(name.endswith(("_create", "_delete", "_update")) for name in listed(port, reads_only.secret))


def test_a_read_returns_only_the_callers_rows_as_structured_content(port: int, alice: Any, bob: Any) -> None:
    Project.objects.create(owner=alice, name="Alice's garden")
    Project.objects.create(owner=bob, name="Bob's garage")
    made = token_create(owner=alice, name="Claude", spec="default")

    result = call(port, made.secret, "tracker_project_list", {})

    assert not result.is_error
    assert result.structured_content is not None
    names = [row["name"] for row in result.structured_content["data"]["results"]]
    assert names == ["Alice's garden"]
    assert "Alice's garden" in text_of(result) and "Bob" not in text_of(result)  # the text fallback says the same


def test_a_call_acts_as_the_tokens_person_through_the_sites_middleware(port: int, alice: Any) -> None:
    made = token_create(owner=alice, name="Claude", spec="default")

    result = call(port, made.secret, "test_whoami", {})

    assert not result.is_error and result.structured_content["data"]["username"] == "alice"


def test_a_write_on_another_persons_id_answers_like_a_missing_id_and_changes_nothing(
    port: int, alice: Any, bob: Any
) -> None:
    theirs = Project.objects.create(owner=alice, name="Alice's garden")
    made = token_create(owner=bob, name="Cursor", spec="default")

    on_theirs = call(port, made.secret, "tracker_project_update", {"pk": theirs.pk, "name": "Mine now"})
    on_none = call(port, made.secret, "tracker_project_update", {"pk": 987654, "name": "Mine now"})

    assert on_theirs.is_error and on_none.is_error
    assert text_of(on_theirs) == text_of(on_none)
    assert '"status": "not_found"' in text_of(on_theirs)
    theirs.refresh_from_db()
    assert theirs.name == "Alice's garden"


def test_form_errors_come_back_by_field_to_the_clients_model(port: int, alice: Any) -> None:
    made = token_create(owner=alice, name="Claude", spec="default")

    result = call(port, made.secret, "tracker_project_create", {"name": ""})

    assert result.is_error
    assert '"status": "invalid"' in text_of(result) and '"name"' in text_of(result)
    assert not Project.objects.exists()


def test_a_read_only_token_cannot_write_whatever_its_spec_allows(port: int, alice: Any) -> None:
    made = token_create(owner=alice, name="Careful", spec="default", read_only=True)

    with pytest.raises(MCPError) as hidden:
        call(port, made.secret, "tracker_project_create", {"name": "Sneaky"})
    with pytest.raises(MCPError) as missing:
        call(port, made.secret, "no_such_tool_at_all", {})

    # Calling a tool the token is not offered answers like calling one that does not exist.
    assert str(hidden.value).replace("tracker_project_create", "X") == str(missing.value).replace(
        "no_such_tool_at_all", "X")
    assert not Project.objects.exists()
    assert not AgentRun.objects.exists()  # nothing was even recorded: there was no call to record


def test_a_destructive_call_without_elicitation_waits_in_the_panel_and_runs_once_after_approval(
    port: int, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    made = token_create(owner=alice, name="Claude", spec="default")

    first = call(port, made.secret, "tracker_project_delete", {"pk": garden.pk})

    assert first.is_error and "waits in their assistant panel" in text_of(first)
    assert "Delete the project “Garden”" in text_of(first)
    assert Project.objects.filter(pk=garden.pk).exists()  # nothing without the yes
    # Asking again before the person answered asks about the same call, not a second one.
    again = call(port, made.secret, "tracker_project_delete", {"pk": garden.pk})
    assert again.is_error and Project.objects.filter(pk=garden.pk).exists()
    run = AgentRun.objects.get()
    assert (run.channel, run.client_name, run.status) == ("mcp", "Claude", "awaiting_confirmation")

    socket = connect(alice)

    async def in_the_panel() -> dict[str, Any]:
        await socket.connect()
        await socket.send_json_to({"type": "assistant.load", "chat_id": run.chat_id, "request_id": "open"})
        loaded = (await receive_until(socket, lambda event: event.get("request_id") == "open"))[-1]
        pending = loaded["pending_confirmation"]
        await socket.send_json_to({"type": "assistant.confirm", "run_id": run.pk, "step_id": pending["id"],
                                   "approve": True})
        await receive_until(socket, lambda event: event["type"] == "assistant.step"
                            and event["step"]["confirmation"] == "approved")
        await socket.disconnect()
        return loaded

    loaded = asyncio.run(in_the_panel())
    assert loaded["pending_confirmation"]["summary"].startswith("Delete the project “Garden”")
    assert Project.objects.filter(pk=garden.pk).exists()  # approved, and waiting for the agent to call again

    retry = call(port, made.secret, "tracker_project_delete", {"pk": garden.pk})

    assert not retry.is_error and retry.structured_content["took_effect"] is True
    assert not Project.objects.filter(pk=garden.pk).exists()
    run.refresh_from_db()
    assert run.status == "succeeded"
    # Once: the approval was used; the next identical call asks anew instead of running on it.
    Project.objects.create(pk=garden.pk, owner=alice, name="Garden")
    after = call(port, made.secret, "tracker_project_delete", {"pk": garden.pk})
    assert after.is_error and "waits in their assistant panel" in text_of(after)
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentStep.objects.filter(took_effect=True).count() == 1


def test_a_destructive_call_with_elicitation_is_done_on_the_persons_yes_and_not_on_their_no(
    port: int, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    garage = Project.objects.create(owner=alice, name="Garage")
    made = token_create(owner=alice, name="Claude", spec="default")
    questions: list[str] = []

    async def asked_then(answer: Any) -> Any:
        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            questions.append(params.message)
            return await answer(context, params)

        return callback

    said_no = call(port, made.secret, "tracker_project_delete", {"pk": garden.pk},
                   elicitation_callback=asyncio.run(asked_then(decline)))
    said_yes = call(port, made.secret, "tracker_project_delete", {"pk": garage.pk},
                    elicitation_callback=asyncio.run(asked_then(approve)))

    # The question is the approval sentence the panel shows, naming the project as the person sees it.
    assert questions[0].startswith("Delete the project “Garden”") and "Claude" in questions[0]
    assert questions[1].startswith("Delete the project “Garage”")
    assert said_no.is_error and "declined" in text_of(said_no)
    assert Project.objects.filter(pk=garden.pk).exists()
    assert not said_yes.is_error and not Project.objects.filter(pk=garage.pk).exists()
    steps = {step.arguments["pk"]: step for step in AgentStep.objects.filter(tool_name="tracker_project_delete")}
    assert (steps[garden.pk].confirmation, steps[garden.pk].took_effect) == ("denied", False)
    assert (steps[garage.pk].confirmation, steps[garage.pk].took_effect) == ("approved", True)


def test_a_replayed_elicitation_answer_is_refused_and_the_action_runs_once(port: int, alice: Any) -> None:
    made = token_create(owner=alice, name="Claude", spec="default")
    garden = Project.objects.create(owner=alice, name="Garden")
    delete = {"pk": garden.pk}

    async def ask(client: Client) -> Any:
        return await client.session.call_tool("tracker_project_delete", delete, allow_input_required=True)

    asked = agent(port, made.secret, ask, elicitation_callback=approve)
    assert isinstance(asked, types.InputRequiredResult)
    (key,) = asked.input_requests
    yes = {key: types.ElicitResult(action="accept", content={"approve": True})}

    async def answer(client: Client) -> Any:
        return await client.session.call_tool("tracker_project_delete", delete, input_responses=yes,
                                              request_state=asked.request_state, allow_input_required=True)

    first = agent(port, made.secret, answer, elicitation_callback=approve)
    Project.objects.create(pk=garden.pk, owner=alice, name="Garden")
    replayed = agent(port, made.secret, answer, elicitation_callback=approve)

    assert isinstance(first, types.CallToolResult) and not first.is_error
    assert isinstance(replayed, types.CallToolResult) and replayed.is_error
    assert "already used" in text_of(replayed)
    assert Project.objects.filter(pk=garden.pk).exists()  # the replay deleted nothing
    assert AgentStep.objects.filter(tool_name="tracker_project_delete", took_effect=True).count() == 1


def test_revoked_expired_and_deactivated_tokens_stop_at_the_next_call(port: int, alice: Any, bob: Any) -> None:
    from django.utils import timezone

    revoked = token_create(owner=alice, name="Revoked", spec="default")
    expired = token_create(owner=alice, name="Expired", spec="default")
    deactivated = token_create(owner=bob, name="Bob's", spec="default")
    for made in (revoked, expired, deactivated):
        assert "tracker_project_list" in listed(port, made.secret)  # each worked a moment ago

    token_revoke(owner=alice, token_id=revoked.token.pk)
    type(expired.token).objects.filter(pk=expired.token.pk).update(expires_at=timezone.now())
    bob.is_active = False
    bob.save(update_fields=["is_active"])

    for made in (revoked, expired, deactivated):
        answer = httpx2.post(endpoint(port), headers={"Authorization": f"Bearer {made.secret}",
                                                      "Content-Type": "application/json"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        assert answer.status_code == 401, made.token.name
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        with pytest.raises(Exception):  # noqa: B017  (the SDK's client reports the 401 as its own error)
            listed(port, made.secret)


def test_a_legacy_client_lists_and_reads_and_its_approvals_go_to_the_panel(port: int, alice: Any) -> None:
    Project.objects.create(owner=alice, name="Garden")
    made = token_create(owner=alice, name="Old client", spec="default")

    assert "tracker_project_list" in listed(port, made.secret, mode="legacy")
    read = call(port, made.secret, "tracker_project_list", {}, mode="legacy")
    delete = call(port, made.secret, "tracker_project_delete", {"pk": Project.objects.get().pk}, mode="legacy",
                  elicitation_callback=approve)

    assert not read.is_error and read.structured_content["data"]["results"][0]["name"] == "Garden"
    # The 2025 revisions cannot ask the person from a stateless server: the question waits in the panel.
    assert delete.is_error and "waits in their assistant panel" in text_of(delete)
    assert Project.objects.exists()


def test_each_call_is_a_run_of_channel_mcp_with_its_step_in_the_admin_and_its_profile(
    port: int, alice: Any, admin_user: Any
) -> None:
    from registry.models import AgentProfile

    Project.objects.create(owner=alice, name="Garden")
    made = token_create(owner=alice, name="Claude", spec="reader")

    call(port, made.secret, "tracker_project_list", {})

    run = AgentRun.objects.get()
    assert (run.channel, run.client_name, run.spec, run.status, run.tool_calls) == (
        "mcp", "Claude", "reader", "succeeded", 1)
    staff = BrowserClient()
    staff.force_login(admin_user)
    page = staff.get(f"/admin/assistant/agentrun/{run.pk}/change/").content.decode()
    assert "tracker_project_list" in page and "Claude" in page
    listing = staff.get("/admin/assistant/agentrun/", {"channel": "mcp"}).content.decode()
    assert f"/admin/assistant/agentrun/{run.pk}/change/" in listing
    # Filed once in the spec's profile of the person, as a panel run is.
    profile = AgentProfile.objects.get(owner=alice, spec_name="reader")
    assert profile.invocations == 1 and profile.tool_usage.get("tracker_project_list")


def test_a_token_of_an_assistant_with_members_calls_its_own_tools_and_no_member_ever_answers(
    port: int, alice: Any
) -> None:
    """Over MCP the person's own agent is the model: it calls the site's tools itself, a run of one step each, and
    no turn of the site's models runs. So a spec's members are not offered (no `ask_<member>`), none is asked, and
    the only reply is the call's own, once."""
    Project.objects.create(owner=alice, name="Garden")
    made = token_create(owner=alice, name="Claude", spec="test-desk")  # test-desk may ask test-clerk

    offered = listed(port, made.secret)
    with pytest.raises(MCPError) as member:
        call(port, made.secret, "ask_test-clerk", {"task": "List my tasks."})
    with pytest.raises(MCPError) as missing:
        call(port, made.secret, "no_such_tool_at_all", {})
    read = call(port, made.secret, "tracker_project_list", {})

    assert set(offered) == {tool.name for tool in tools_for(alice, "test-desk")}
    assert not any(name.startswith("ask_") for name in offered)
    assert str(member.value).replace("ask_test-clerk", "X") == str(missing.value).replace("no_such_tool_at_all", "X")
    assert not read.is_error
    run = AgentRun.objects.get()
    assert (run.channel, run.spec, run.model, run.answered_by_id) == ("mcp", "test-desk", "mcp-client", None)
    assert not AgentRun.objects.filter(root=run).exists()
    assert list(AgentMessage.objects.filter(run=run, role="assistant").values_list("content", flat=True)) == [
        run.reply]


def test_a_call_waiting_for_approval_ends_when_its_token_is_revoked_or_nobody_takes_it_up(
    port: int, alice: Any, settings: Any
) -> None:
    from assistant.turn.sweeper import sweep_runs

    garden = Project.objects.create(owner=alice, name="Garden")
    revoked = token_create(owner=alice, name="Revoked", spec="default")
    forgotten = token_create(owner=alice, name="Forgotten", spec="default")
    call(port, revoked.secret, "tracker_project_delete", {"pk": garden.pk})
    call(port, forgotten.secret, "tracker_project_delete", {"pk": garden.pk})
    by_token = {run.client_name: run for run in AgentRun.objects.all()}
    assert {run.status for run in by_token.values()} == {"awaiting_confirmation"}

    token_revoke(owner=alice, token_id=revoked.token.pk)
    AgentRun.objects.filter(pk=by_token["Forgotten"].pk).update(
        created_at=by_token["Forgotten"].created_at - timedelta(hours=1))
    sweep_runs()

    for name, reason in (("Revoked", "token_revoked"), ("Forgotten", "expired")):
        run = AgentRun.objects.get(pk=by_token[name].pk)
        assert (run.status, run.stop_reason) == ("cancelled", reason), name
        step = run.steps.get()
        assert step.state == "finished" and step.took_effect is False and step.result["status"] == "not_run"
    assert Project.objects.filter(pk=garden.pk).exists()


def test_the_person_may_correct_the_agents_values_in_the_approval_form_and_what_runs_is_theirs(
    port: int, alice: Any
) -> None:
    """Approve with changes over MCP: the elicitation form holds each plain value the agent asked for, prefilled;
    a correction that does not fit is refused saying why, with nothing done; one that fits is what runs, the step
    keeps the agent's values, and the agent is told what the person changed."""
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    made = token_create(owner=alice, name="Claude", spec="default")
    forms: list[dict[str, Any]] = []

    def correcting(title: str) -> Callable[..., Awaitable[types.ElicitResult]]:
        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            forms.append(params.requested_schema)
            return types.ElicitResult(action="accept", content={"approve": True, "title": title})

        return callback

    asked = {"pk": task.pk, "title": "Buy mlk"}
    unfit = call(port, made.secret, "test_task_change", asked, elicitation_callback=correcting("x" * 201))
    fixed = call(port, made.secret, "test_task_change", asked, elicitation_callback=correcting("Buy milk"))

    # The form: Approve, and the agent's plain values prefilled, described as the tool's own form says them.
    title = forms[0]["properties"]["title"]
    assert (title["type"], title["default"]) == ("string", "Buy mlk") and title.get("description")
    assert forms[0]["properties"]["pk"]["default"] == task.pk and forms[0]["required"] == ["approve"]
    assert unfit.is_error and "title" in text_of(unfit) and "too long" in text_of(unfit)
    assert not fixed.is_error, text_of(fixed)
    assert Task.objects.get(pk=task.pk).title == "Buy milk"
    told = json.loads(text_of(fixed))
    assert told["changed_by_person"] == {"title": {"asked": "Buy mlk", "approved": "Buy milk"}}
    step = AgentStep.objects.get(tool_name="test_task_change", took_effect=True)
    assert (step.arguments["title"], step.asked_arguments["title"], step.confirmation) == (
        "Buy milk", "Buy mlk", "approved")
