"""The person's authority is live: a tool call is a request through the site's own middleware, made with
the session the message was sent from, and when that session ends the assistant stops acting for them.

Everything here goes through the real socket (the consumer, the channel layer), the real Celery worker
and the real database; only the language model is scripted.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.messages import constants
from django.contrib.sessions.models import Session
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone

from assistant.access.authority import SentFrom, session_user
from assistant.conf import assistant_settings
from assistant.conversation.services import chat_send
from assistant.models import AgentRun
from assistant.testing.sockets import receive_until, signed_in_client
from assistant.tools import execute_tool
from config.asgi import application
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.middleware import VERIFY_PATH
from tests.testapp.models import Effect
from tracker.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

ORIGIN = b"http://127.0.0.1:8000"
# The consumer re-checks its session every SESSION_CHECK_SECONDS (3 by default); "a few seconds". Three
# periods is how long a test waits for a close the re-check makes: a bound on liveness, not on speed.
CLOSE_WITHIN_SECONDS = 3 * float(assistant_settings.SESSION_CHECK_SECONDS)
# A re-check period the tests about the logout signal never reach: whatever closes the socket before half
# of it has passed is the signal.
CHECK_OUT_OF_REACH_SECONDS = 60.0


def session_key(client: Client) -> str:
    return str(client.cookies["sessionid"].value)


def socket_of(client: Client, address: str = "198.51.100.23") -> WebsocketCommunicator:
    """The assistant's socket opened by that tab, from `address`."""
    socket = WebsocketCommunicator(
        application, "/ws/assistant/",
        headers=[(b"origin", ORIGIN), (b"cookie", f"sessionid={session_key(client)}".encode())],
    )
    socket.scope["client"] = (address, 50123)
    return socket



async def until_closed(socket: WebsocketCommunicator, timeout: float) -> tuple[list[dict[str, Any]], int]:
    """The events the socket still gets, and its close code; fails if it is still open after `timeout`."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            output = await socket.receive_output(timeout=max(0.05, remaining))
        except TimeoutError:
            raise AssertionError(f"the socket was still open after {timeout:.0f}s; it got {events}") from None
        if output["type"] == "websocket.close":
            return events, output.get("code", 1000)
        events.append(json.loads(output["text"]))


def tool_results(run: AgentRun, name: str) -> list[dict[str, Any]]:
    return [step.result for step in run.steps.filter(kind="tool_call", tool_name=name).order_by("seq")]


# --- 6: a tool call goes through the site's middleware, as the person's own session -------------------------


@pytest.mark.parametrize(
    ("flag", "status", "reason_mentions"),
    [("testapp_needs_2fa", "denied", VERIFY_PATH), ("testapp_maintenance", "error", "503")],
    ids=["second-factor-pending", "maintenance"],
)
def test_the_sites_own_gate_middleware_applies_to_tool_calls(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str], flag: str, status: str, reason_mentions: str
) -> None:
    tab = signed_in_client(alice, **{flag: True})
    model = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "gated"}}]},
                   {"text": "Tried."})
    socket = socket_of(tab)

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "record it"})
        await receive_until(socket, lambda event: event["type"] in {"assistant.replied", "assistant.reply_failed"})
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    run = AgentRun.objects.get()
    [result] = tool_results(run, "test_record_effect")
    assert (result["status"], result["took_effect"]) == (status, False), result
    assert reason_mentions in result["reason"]
    assert not Effect.objects.exists()


def test_the_view_sees_the_persons_session_and_the_address_of_their_socket(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    tab = signed_in_client(alice, testapp_note="prefers blue")
    model = script({"tool_calls": [{"name": "test_whoami", "arguments": {}}]}, {"text": "You are alice."})
    socket = socket_of(tab, address="203.0.113.9")

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "who am I?"})
        await receive_until(socket, lambda event: event["type"] in {"assistant.replied", "assistant.reply_failed"})
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    [result] = tool_results(AgentRun.objects.get(), "test_whoami")
    # As a server's request: the environ a WSGI server always fills in (PEP 3333), which middleware may read.
    assert result["data"] == {"username": "alice", "note": "prefers blue", "remote_addr": "203.0.113.9",
                              "protocol": "HTTP/1.1", "host": "127.0.0.1:8000", "secure": False}


def test_write_tools_pass_the_sites_csrf_check_with_a_real_token(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    tab = signed_in_client(alice)
    model = script({"tool_calls": [{"name": "test_csrf_seen", "arguments": {}}]}, {"text": "Checked."})
    socket = socket_of(tab)

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "check"})
        await receive_until(socket, lambda event: event["type"] in {"assistant.replied", "assistant.reply_failed"})
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    [result] = tool_results(AgentRun.objects.get(), "test_csrf_seen")
    # CsrfViewMiddleware checked the request (it was not exempted) and it passed: the origin and token matched.
    assert result["status"] == "done", result
    assert result["data"] == {"exempted": False, "secret_present": True, "origin": "http://127.0.0.1:8000"}


@override_settings(CSRF_USE_SESSIONS=True)
def test_with_csrf_secrets_in_sessions_the_token_is_the_persons_own(alice: Any) -> None:
    tab = signed_in_client(alice)
    sent_from = SentFrom(session_key=session_key(tab), client_address="198.51.100.23", origin=ORIGIN.decode())

    outcome = execute_tool(alice, "test_csrf_seen", {}, sent_from=sent_from)

    assert outcome.status == "done", outcome
    assert outcome.data == {"exempted": False, "secret_present": True, "origin": "http://127.0.0.1:8000"}


def test_an_async_function_view_works_as_a_tool(alice: Any) -> None:
    tab = signed_in_client(alice)
    sent_from = SentFrom(session_key=session_key(tab), client_address="198.51.100.23", origin=ORIGIN.decode())

    outcome = execute_tool(alice, "test_async_effect", {"label": "from async"}, sent_from=sent_from)
    without_session = execute_tool(alice, "test_async_effect", {"label": "explicit user"})

    assert (outcome.status, outcome.took_effect, outcome.data) == (
        "done", True, {"recorded": "from async", "by": "alice"}), outcome
    assert without_session.status == "done", without_session
    assert sorted(Effect.objects.filter(owner=alice).values_list("label", flat=True)) == ["explicit user", "from async"]


def test_messages_reach_the_model_and_stay_out_of_the_persons_session(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    tab = signed_in_client(alice)
    model = script({"tool_calls": [{"name": "test_flash", "arguments": {"label": "flashed"}}]}, {"text": "Done."})
    socket = socket_of(tab)

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "flash it"})
        await receive_until(socket, lambda event: event["type"] in {"assistant.replied", "assistant.reply_failed"})
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    [result] = tool_results(AgentRun.objects.get(), "test_flash")
    assert result["data"]["messages"] == [{"level": constants.DEFAULT_TAGS[constants.SUCCESS],
                                           "text": "Recorded flashed."}]
    # The person's next page shows no message the assistant's request collected.
    page = tab.get("/")
    assert page.status_code == 200
    assert [str(message) for message in page.context["messages"]] == []
    assert "_messages" not in Session.objects.get(session_key=session_key(tab)).get_decoded()


# --- 7: when the session ends, the assistant stops acting for the person ------------------------------------


def test_logout_in_another_tab_closes_the_socket_and_ends_the_waiting_run_for_good(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})
    tab = signed_in_client(alice)
    socket = socket_of(tab)
    state: dict[str, Any] = {}

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "delete Home"})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.confirm")
        state["run_id"], state["step_id"] = events[-1]["run_id"], events[-1]["step"]["id"]
        logged_out_at = time.monotonic()
        response = await database_sync_to_async(tab.post)("/logout/")  # the site's own logout view, another tab
        assert response.status_code == 302
        events, code = await until_closed(socket, CHECK_OUT_OF_REACH_SECONDS / 2)
        state["closed_after"] = time.monotonic() - logged_out_at
        assert code == 4401
        assert events[-1]["type"] == "assistant.session_ended"
        await socket.disconnect()

    with assistant_settings_with(MODEL=model, SESSION_CHECK_SECONDS=CHECK_OUT_OF_REACH_SECONDS):
        asyncio.run(scenario())
    # The logout signal closed it: the periodic re-check could not have run yet.
    assert state["closed_after"] < CHECK_OUT_OF_REACH_SECONDS
    run = AgentRun.objects.get(pk=state["run_id"])
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    # Signing out is not the person's "no": the question stays unanswered, and the step says it was not taken.
    closed = run.steps.get(kind="tool_call")
    assert (closed.state, closed.confirmation, closed.took_effect) == ("finished", "", False)
    assert closed.reason == "You were signed out before answering; the action was not taken."

    # Logging in again and approving the old question changes nothing.
    again = socket_of(signed_in_client(alice))

    async def approve_later() -> None:
        assert (await again.connect())[0]
        await again.send_json_to({"type": "assistant.confirm", "run_id": state["run_id"],
                                  "step_id": state["step_id"], "approve": True})
        answer = await again.receive_json_from(timeout=5)
        assert (answer["type"], answer["code"]) == ("assistant.error", "stale_confirmation")
        await again.disconnect()

    asyncio.run(approve_later())
    celery_worker.caught_up()  # had the approval queued the run again, the worker would have run it by now
    assert Project.objects.filter(pk=home.pk).exists()
    assert AgentRun.objects.get(pk=state["run_id"]).status == "cancelled"


def test_logging_out_one_session_leaves_the_persons_other_sessions_open(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    laptop, phone, tablet = signed_in_client(alice), signed_in_client(alice), signed_in_client(alice)
    on_laptop, on_phone, on_tablet = socket_of(laptop), socket_of(phone), socket_of(tablet)

    async def scenario() -> None:
        for socket in (on_laptop, on_phone, on_tablet):
            assert (await socket.connect())[0]
        await database_sync_to_async(phone.post)("/logout/")
        _, code = await until_closed(on_phone, CLOSE_WITHIN_SECONDS)
        assert code == 4401
        # A session that ends without a signal is closed by the periodic re-check alone, which looks at every
        # open session in the same pass: once the tablet is closed, that pass has judged the laptop too.
        await database_sync_to_async(_expire_session)(alice, session_key(tablet))
        _, code = await until_closed(on_tablet, CLOSE_WITHIN_SECONDS)
        assert code == 4401
        await on_laptop.send_json_to({"type": "assistant.ping", "id": "still here"})
        assert await on_laptop.receive_json_from(timeout=5) == {"type": "assistant.pong", "id": "still here"}
        for socket in (on_laptop, on_phone, on_tablet):
            await socket.disconnect()

    asyncio.run(scenario())


def _deactivate(user: Any, key: str) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


def _change_password(user: Any, key: str) -> None:
    user.set_password("a-new-password-nobody-knows")  # the session's auth hash no longer matches
    user.save(update_fields=["password"])


def _delete_session(user: Any, key: str) -> None:
    Session.objects.filter(session_key=key).delete()


def _expire_session(user: Any, key: str) -> None:
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("end_session", [_deactivate, _change_password, _delete_session, _expire_session],
                         ids=["deactivated", "password-changed", "session-deleted", "session-expired"])
def test_a_session_ending_without_logout_closes_the_socket_and_ends_the_waiting_run(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str], end_session: Callable[[Any, str], None]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})
    tab = signed_in_client(alice)
    socket = socket_of(tab)
    state: dict[str, Any] = {}

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "delete Home"})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.confirm")
        state["run_id"] = events[-1]["run_id"]
        await database_sync_to_async(end_session)(alice, session_key(tab))
        events, code = await until_closed(socket, CLOSE_WITHIN_SECONDS)
        assert code == 4401
        assert events[-1]["type"] == "assistant.session_ended"
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    run = AgentRun.objects.get(pk=state["run_id"])
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    assert Project.objects.filter(pk=home.pk).exists()


def test_a_question_from_a_session_that_ended_unobserved_is_gone_when_the_person_returns(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})
    old_tab = signed_in_client(alice)
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="delete Home",
                        sent_from=SentFrom(session_key=session_key(old_tab), client_address=None, origin="")).run
        wait_for_run(run.pk, "awaiting_confirmation")
    _expire_session(alice, session_key(old_tab))  # the tab was closed: no socket was there to notice
    socket = socket_of(signed_in_client(alice))

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.load"})
        loaded = await receive_until(socket, lambda event: event["type"] == "assistant.messages_loaded")
        assert (loaded[-1]["active_run"], loaded[-1]["pending_confirmation"]) == (None, None)
        asked = await database_sync_to_async(run.steps.get)(kind="tool_call")
        await socket.send_json_to({"type": "assistant.confirm", "run_id": run.pk, "step_id": asked.pk, "approve": True})
        answer = await receive_until(socket, lambda event: event["type"] == "assistant.error")
        assert answer[-1]["code"] == "stale_confirmation"
        await socket.disconnect()

    asyncio.run(scenario())
    assert (AgentRun.objects.get(pk=run.pk).stop_reason, Project.objects.filter(pk=home.pk).exists()) == (
        "session_ended", True)


def test_a_working_run_takes_no_further_action_once_the_person_logged_out(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "after logout"}}]},
        {"text": "Recorded."},
    )
    tab = signed_in_client(alice)
    socket = socket_of(tab)
    state: dict[str, Any] = {}

    async def scenario() -> None:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "wait, then record"})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.step"
                                     and event["step"]["tool_name"] == "test_wait")
        state["run_id"] = events[-1]["run_id"]
        await database_sync_to_async(tab.post)("/logout/")
        await until_closed(socket, CLOSE_WITHIN_SECONDS)
        await socket.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    run = wait_for_run(state["run_id"], *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended"), run.error
    assert not Effect.objects.exists()
    assert not [result for result in tool_results(run, "test_record_effect") if result["took_effect"]]


def test_a_queued_run_whose_session_ended_does_nothing(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "queued"}}]},
                   {"text": "Recorded."})
    tab = signed_in_client(alice)
    key = session_key(tab)
    with assistant_settings_with(MODEL=model):
        # The session ends before any worker takes the run up (the run is enqueued when this block commits).
        with transaction.atomic():
            run = chat_send(user=alice, content="record it",
                            sent_from=SentFrom(session_key=key, client_address=None, origin="")).run
            _expire_session(alice, key)
        run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    assert run.model_calls == 0 and not run.steps.filter(kind="tool_call").exists()
    assert not Effect.objects.exists()


def test_a_tool_call_with_an_ended_session_is_never_executed_as_the_person(alice: Any) -> None:
    tab = signed_in_client(alice)
    sent_from = SentFrom(session_key=session_key(tab), client_address=None, origin="")
    tab.post("/logout/")

    for name, arguments in [("test_record_effect", {"label": "late"}), ("test_whoami", {}),
                            ("tracker_project_list", {})]:
        outcome = execute_tool(alice, name, arguments, sent_from=sent_from)
        assert (outcome.status, outcome.took_effect, outcome.session_ended) == ("denied", False, True), name
    assert not Effect.objects.exists()



def test_staff_reviewing_a_run_see_where_it_came_from_but_never_the_session_key(
    alice: Any, user_factory: Callable[..., Any]
) -> None:
    tab = signed_in_client(alice)
    key = session_key(tab)
    run = chat_send(user=alice, content="hello",
                    sent_from=SentFrom(session_key=key, client_address="203.0.113.9", origin=ORIGIN.decode())).run
    staff = signed_in_client(user_factory("reviewer", is_staff=True, is_superuser=True))

    page = staff.get(f"/admin/assistant/agentrun/{run.pk}/change/")

    assert page.status_code == 200
    assert "203.0.113.9" in page.content.decode()
    assert key not in page.content.decode()


def test_checking_a_session_signed_under_a_previous_secret_key_does_not_sign_the_person_out(alice: Any) -> None:
    from django.conf import settings

    tab = signed_in_client(alice)
    key = session_key(tab)

    # The site rotates its secret and keeps the old one as a fallback: sessions signed in before stay valid.
    with override_settings(SECRET_KEY="a-rotated-secret-key-" + "x" * 40, SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        assert session_user(key) == alice
        assert session_user(key) == alice  # the check moved nothing: the same key still signs in
        assert Session.objects.filter(session_key=key).exists()
        assert tab.get("/assistant/").status_code == 200  # and the person's own next page is still theirs
