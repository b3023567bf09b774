"""The record of what a person's own agent did over MCP (issue 21): each call is a run of channel `mcp` in the
token's own chat, made here through the endpoint's own code (`assistant.mcp.calls`, as `tools/call` runs it).

What is held here: the person reads that chat (its channel and the token's name come with it on the socket)
and cannot type in it, nor is it ever their current chat; staff filter the run list and the chat list by
channel, a run's page says "via MCP — token “…”" and links the token; the dashboard's figures are those of
the chosen channel, its links keep the choice, and choosing one costs no more queries."""

from __future__ import annotations

import asyncio
import datetime
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from assistant.conversation.services import Refused, chat_send
from assistant.live import selectors
from assistant.mcp.calls import Caller, approval_summary, run_open, step_run
from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import token_create
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.testing.sockets import connect, receive_until
from assistant.tools import Tool, tools_for
from tests.review.test_dashboard import Page, in_range, lookups
from tracker.models import Project

RUN_LIST = "/admin/assistant/agentrun/"
CHAT_LIST = "/admin/assistant/agentchat/"
DASHBOARD = "/admin/assistant/agentrun/dashboard/"


def offered(caller: Caller, name: str) -> Tool:
    """The tool as the token's offer has it (its spec and profile), as the endpoint looks it up."""
    return {tool.name: tool for tool in tools_for(caller.user, caller.token.spec, caller.profile)}[name]


def agent_calls(user: Any, token: AccessToken, name: str, arguments: dict[str, Any]) -> AgentRun:
    """One `tools/call` of a tool that needs no approval, as the endpoint makes it: its run, then the step run."""
    caller = Caller(user=user, token=token)
    run, step = run_open(caller, offered(caller, name), arguments)
    step_run(caller, run, step)
    return AgentRun.objects.get(pk=run.pk)


def agent_asks(user: Any, token: AccessToken, name: str, arguments: dict[str, Any]) -> tuple[AgentRun, AgentStep]:
    """A call the panel would pause on, as the endpoint opens it: waiting for the person's yes."""
    caller = Caller(user=user, token=token)
    tool = offered(caller, name)
    assert tool.confirm
    return run_open(caller, tool, arguments, summary=approval_summary(caller, tool, arguments))


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory(is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def laptop(alice: Any) -> AccessToken:
    return token_create(owner=alice, name="Laptop", spec="default").token


@pytest.fixture
def record(alice: Any, laptop: AccessToken) -> dict[str, AgentRun]:
    """Alice's agent made a project and listed them; she also asked the panel something herself."""
    made = agent_calls(alice, laptop, "tracker_project_create", {"name": "Garden"})
    listed = agent_calls(alice, laptop, "tracker_project_list", {})
    chat = AgentChat.objects.create(owner=alice, title="My own question")
    panel = AgentRun.objects.create(owner=alice, chat=chat, spec="default", status=AgentRun.Status.SUCCEEDED,
                                    duration_ms=1500, total_tokens=120)
    return {"made": made, "listed": listed, "panel": panel}


# --- the person's side -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_agents_calls_are_one_chat_of_its_own_that_is_never_the_persons_current_one(
    alice: Any, laptop: AccessToken, record: dict[str, AgentRun]
) -> None:
    assert Project.objects.filter(owner=alice, name="Garden").exists()  # it acted as her
    chat = AgentChat.objects.get(channel="mcp")
    assert (chat.owner, chat.title) == (alice, "Laptop (your agent)")
    assert {record["made"].chat_id, record["listed"].chat_id} == {chat.pk}
    assert [(message.role, message.content) for message in AgentMessage.objects.filter(chat=chat).order_by("id")] == [
        # Each reply says what came of the call: what the view said it did, how many rows a read gave.
        ("user", "Your agent “Laptop” called tracker_project_create."), ("assistant", "Project “Garden” created."),
        ("user", "Your agent “Laptop” called tracker_project_list."), ("assistant", "Read 1 result."),
    ]
    # Her agent's newer calls do not make its chat the one the panel opens on, nor the one a message goes to.
    assert selectors.chat_current(user=alice).title == "My own question"
    sent = chat_send(user=alice, content="and my tasks?")
    assert sent.chat.channel == "panel" and sent.chat.pk != chat.pk
    with pytest.raises(Refused) as refused:
        chat_send(user=alice, content="hello agent", chat_id=chat.pk)
    assert refused.value.code == "agent_chat"
    assert not AgentMessage.objects.filter(chat=chat, content="hello agent").exists()


@pytest.mark.django_db(transaction=True)
def test_opening_the_agents_chat_tells_the_panel_its_channel_and_the_tokens_name(
    alice: Any, laptop: AccessToken
) -> None:
    agent_calls(alice, laptop, "tracker_project_list", {})
    chat = AgentChat.objects.get(channel="mcp")
    socket = connect(alice)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.chats", "request_id": "chats"})
        listed = (await receive_until(socket, lambda event: event["type"] == "assistant.chats_listed"))[-1]
        await socket.send_json_to({"type": "assistant.load", "chat_id": chat.pk, "steps": True, "request_id": "l"})
        loaded = (await receive_until(socket, lambda event: event["type"] == "assistant.messages_loaded"))[-1]
        await socket.send_json_to({"type": "assistant.send", "chat_id": chat.pk, "content": "hi", "request_id": "s"})
        refused = (await receive_until(socket, lambda event: event["type"] == "assistant.error"))[-1]
        await socket.disconnect()
        return listed, loaded, refused

    listed, loaded, refused = asyncio.run(scenario())
    assert [(row["id"], row["channel"]) for row in listed["chats"]] == [(chat.pk, "mcp")]
    assert loaded["chat"]["channel"] == "mcp"
    shown = [(run["channel"], run["client"], [step["tool_name"] for step in run["steps"]]) for run in loaded["runs"]]
    assert shown == [("mcp", "Laptop", ["tracker_project_list"])]
    assert (refused["code"], refused["request_id"]) == ("agent_chat", "s")


# --- staff: the run list, a run's page, the chat list --------------------------------------------------


def _listed_run_ids(html: str) -> set[int]:
    return {int(found) for found in re.findall(r'<input type="checkbox" name="_selected_action" value="(\d+)"', html)}


@pytest.mark.django_db
def test_staff_filter_the_run_list_by_channel_and_read_which_token_made_each_mcp_run(
    staff: Client, record: dict[str, AgentRun]
) -> None:
    everything = staff.get(RUN_LIST).content.decode()
    assert _listed_run_ids(everything) == {run.pk for run in record.values()}
    # The column: the token's name beside "MCP"; a run of the panel says so.
    assert everything.count("MCP<br>“Laptop”") == 2
    assert re.search(r'<td class="field-via">panel</td>', everything)
    # The sidebar offers both channels, in words.
    assert "MCP (the person&#x27;s own agent)" in everything and "?channel=mcp" in everything

    mcp = staff.get(RUN_LIST + "?channel=mcp").content.decode()
    assert _listed_run_ids(mcp) == {record["made"].pk, record["listed"].pk}
    panel = staff.get(RUN_LIST + "?channel=panel").content.decode()
    assert _listed_run_ids(panel) == {record["panel"].pk}
    # Searching by the token's name finds its runs.
    assert _listed_run_ids(staff.get(RUN_LIST + "?q=Laptop").content.decode()) == {
        record["made"].pk, record["listed"].pk}
    # A channel there is not is said, never read as "every run".
    unknown = staff.get(RUN_LIST + "?channel=email", follow=True)
    assert "could not be filtered as asked" in unknown.content.decode()
    assert "“email” is not a channel" in unknown.content.decode()


@pytest.mark.django_db
def test_a_runs_page_says_it_came_via_mcp_and_links_the_token(
    staff: Client, laptop: AccessToken, record: dict[str, AgentRun]
) -> None:
    page = staff.get(reverse("admin:assistant_agentrun_change", args=[record["made"].pk])).content.decode()
    token_page = reverse("admin:assistant_mcp_accesstoken_change", args=[laptop.pk])
    assert re.search(rf'via MCP — token <a href="{re.escape(token_page)}">“Laptop”</a>', page), page
    assert f'href="{RUN_LIST}?channel=mcp"' in page
    # What the agent asked and what came of it read as the timeline of any run.
    assert "Your agent “Laptop” called tracker_project_create." in page and "tracker_project_create" in page
    own = staff.get(reverse("admin:assistant_agentrun_change", args=[record["panel"].pk])).content.decode()
    assert re.search(r'<dd class="run-channel">the panel · ', own) and "via MCP" not in own


@pytest.mark.django_db
def test_staff_filter_the_chat_list_by_channel(staff: Client, record: dict[str, AgentRun]) -> None:
    agents = staff.get(CHAT_LIST + "?channel=mcp").content.decode()
    assert "Laptop (your agent)" in agents and "My own question" not in agents
    assert '<td class="field-channel_shown">MCP (the person&#x27;s own agent)</td>' in agents
    own = staff.get(CHAT_LIST + "?channel=panel").content.decode()
    assert "My own question" in own and "Laptop (your agent)" not in own


# --- staff: the dashboard ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_dashboards_figures_are_those_of_the_chosen_channel_and_its_links_keep_it(
    staff: Client, alice: Any, laptop: AccessToken, record: dict[str, AgentRun]
) -> None:
    today = timezone.localdate()
    start = today - datetime.timedelta(days=13)
    every = Page(staff.get(DASHBOARD).content.decode())
    assert every.figures["figure-runs"][0] == "3"
    # Of them, the agent's calls: linked to the run list of that channel.
    assert every.figures["figure-mcp-runs"] == ("2", every.figures["figure-mcp-runs"][1])
    assert lookups(every.figures["figure-mcp-runs"][1]) == in_range(start, today, channel="mcp")

    mcp = Page(staff.get(DASHBOARD + "?channel=mcp").content.decode())
    assert mcp.figures["figure-runs"][0] == "2"
    assert lookups(mcp.figures["figure-runs"][1]) == in_range(start, today, channel="mcp")
    assert "figure-mcp-runs" not in mcp.figures
    tools = mcp.rows("table-tools")
    assert set(tools) == {"tracker_project_create", "tracker_project_list"}
    assert lookups(tools["tracker_project_create"][0][1]) == in_range(
        start, today, channel="mcp", steps__kind="tool_call", steps__tool_name="tracker_project_create")
    # A day's link keeps the channel too.
    assert lookups(mcp.rows("table-runs")[today.isoformat()][0][1]) == in_range(today, today, channel="mcp")

    panel = Page(staff.get(DASHBOARD + "?channel=panel").content.decode())
    assert panel.figures["figure-runs"][0] == "1"
    assert panel.rows("table-tools") == {"No tool calls in this range.": []}
    assert panel.figures["figure-tokens"][0] == "120"

    # The form shows the choice; a channel there is not gives every channel, and says so.
    chosen = staff.get(DASHBOARD + "?channel=mcp").content.decode()
    assert '<option value="mcp" selected>MCP (people&#x27;s own agents)</option>' in chosen
    unknown = staff.get(DASHBOARD + "?channel=fax", follow=True).content.decode()
    assert "“fax” is not a channel (panel or mcp): showing every channel." in unknown
    assert Page(unknown).figures["figure-runs"][0] == "3"


@pytest.mark.django_db
def test_choosing_a_channel_costs_the_dashboard_no_more_queries(
    staff: Client, record: dict[str, AgentRun]
) -> None:
    with CaptureQueriesContext(connection) as all_queries:
        staff.get(DASHBOARD)
    with CaptureQueriesContext(connection) as mcp_queries:
        staff.get(DASHBOARD + "?channel=mcp")
    assert len(mcp_queries) == len(all_queries) <= 12, [query["sql"] for query in mcp_queries]


def test_a_call_of_the_agents_leaves_its_tools_card_on_the_step_as_a_panel_call_does(
        alice: Any, laptop: AccessToken, staff: Client) -> None:
    made = agent_calls(alice, laptop, "tracker_project_create", {"name": "Garden", "description": "Beds & paths"})

    [step] = AgentStep.objects.filter(run=made, tool_name="tracker_project_create")
    garden = Project.objects.get(name="Garden")
    # The tracker's project card, as alice reads the project she made.
    assert f'<a href="/tracker/projects/{garden.pk}/" rel="noopener noreferrer nofollow">Garden</a>' in step.card
    assert "Beds &amp; paths" in step.card and "<dd>alice</dd>" in step.card
    # The agent's model is told the outcome, never the card; staff see the card on the run's page.
    assert "card" not in str(step.result)
    assert step.card in staff.get(f"{RUN_LIST}{made.pk}/change/").content.decode()
