"""A session key is a credential: nobody recovers one through the admin, whatever they may view.

The attack this guards against: a staff member allowed only to view runs filtered the run list on a
superuser's session key (`?owner__id__exact=N&session_key__regex=^ab[0-9a-h]`), a row or none per
request, and had the whole `sessionid` in about 200 requests. Everything here goes through the real
stack: people sign in through the real login forms (real session cookies), the superuser's run is sent
through the real socket, and the attacker reads the real admin pages.
"""

from __future__ import annotations

import asyncio
import re
import string
from collections.abc import Callable
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client, override_settings

from assistant.access.authority import RunAuthority, SentFrom, SessionEnded
from assistant.conversation.services import ended_sessions_runs_end, session_runs_end
from assistant.models import AgentRun
from assistant.testing.sockets import ORIGIN, receive_until
from config.asgi import application
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

RUNS = "/admin/assistant/agentrun/"
# Django's session keys: 32 characters of these.
KEY_CHARACTERS = string.ascii_lowercase + string.digits


def signed_in_through_the_form(username: str, *, login_url: str = "/login/") -> Client:
    """A browser that signed in by posting the login form, as a person does (password `pw`)."""
    browser = Client()
    answer = browser.post(login_url, {"username": username, "password": "pw", "next": "/"})
    assert answer.status_code == 302, answer.content.decode()[:500]
    assert browser.cookies["sessionid"].value
    return browser


@pytest.fixture
def viewer(user_factory: Callable[..., Any]) -> Client:
    """Staff with exactly one permission: viewing agent runs. Signed in through the admin's login form."""
    user = user_factory("viewer", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="assistant",
                                                        codename="view_agentrun"))
    return signed_in_through_the_form("viewer", login_url="/admin/login/")


@pytest.fixture
def root(user_factory: Callable[..., Any]) -> Any:
    return user_factory("root", is_staff=True, is_superuser=True)


Send = Callable[..., AgentRun]


@pytest.fixture
def live_run(root: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> Send:
    """Sends root's message from a browser's tab, as the panel does; returns its run once it is live: the
    real worker took it up and it waits for root to approve deleting a project, with root's session."""
    home = Project.objects.create(owner=root, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})

    def send(browser: Client, text: str = "delete Home", *, new_chat: bool = False) -> AgentRun:
        socket = WebsocketCommunicator(application, "/ws/assistant/", headers=[
            ORIGIN, (b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode())])
        state: dict[str, Any] = {}

        async def scenario() -> None:
            assert (await socket.connect())[0]
            await socket.send_json_to({"type": "assistant.send", "content": text, "new_chat": new_chat})
            events = await receive_until(socket, lambda event: event["type"] in {
                "assistant.confirm", "assistant.error", "assistant.reply_failed"})
            assert events[-1]["type"] == "assistant.confirm", events[-1]
            state["run_id"] = events[-1]["run_id"]
            await socket.disconnect()

        with assistant_settings_with(MODEL=model):
            asyncio.run(scenario())
        run = AgentRun.objects.get(pk=state["run_id"])
        assert run.status == "awaiting_confirmation"
        return run

    return send


def listed(page: Any) -> set[int]:
    return {int(pk) for pk in re.findall(r'name="_selected_action" value="(\d+)"', page.content.decode())}


def recover_session_key(attacker: Client, run: AgentRun, field: str = "session_key") -> str | None:
    """The attack as it was done: grow a prefix one character at a time, halving the candidates with a
    regex per request. The recovered key, or None as soon as the admin refuses the lookup."""
    prefix = ""
    while len(prefix) < 32:
        candidates = KEY_CHARACTERS
        while len(candidates) > 1:
            half = candidates[: len(candidates) // 2]
            page = attacker.get(RUNS, {"owner__id__exact": run.owner_id, f"{field}__regex": f"^{prefix}[{half}]"})
            if page.status_code != 200:
                return None
            candidates = half if run.pk in listed(page) else candidates[len(half):]
        prefix += candidates
    return prefix


def test_a_view_only_staff_member_cannot_recover_a_superusers_session_from_the_run_list(
    viewer: Client, root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)

    recovered = recover_session_key(viewer, run)

    assert recovered is None, "the run list answered a regex on the session, one character at a time"
    assert recovered != browser.cookies["sessionid"].value


SESSION_FIELDS = ("session_key", "session_digest", "session_sealed")
LOOKUPS = ("regex", "iregex", "startswith", "istartswith", "contains", "icontains", "endswith", "gt", "lt", "gte",
           "lte", "exact", "in", "isnull", "")
# Lookups on columns the run list does not offer as filters: each a yes-or-no question about that column.
NOT_OFFERED = (
    "reply__contains", "feedback_comment__startswith", "client_address", "client_origin__regex",
    "lease_owner__startswith", "config__icontains", "config__model__startswith", "attempts__gt", "id__gt",
    "chat__title__contains", "owner__password__startswith", "owner__username__regex", "owner__email__contains",
    "messages__content__contains", "steps__arguments__icontains", "steps__result__reason__contains",
    "status__regex", "spec__startswith", "error__startswith", "created_at__year__gt",
)


def test_every_lookup_on_the_runs_session_is_refused(viewer: Client, root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)
    key = browser.cookies["sessionid"].value
    values = {"regex": f"^{key[0]}", "iregex": f"^{key[0]}", "gt": "", "lt": "~", "gte": "", "lte": "~", "in": key,
              "isnull": "False"}

    answered = {}
    for field in SESSION_FIELDS:
        for lookup in LOOKUPS:
            name = f"{field}__{lookup}" if lookup else field
            page = viewer.get(RUNS, {"owner__id__exact": run.owner_id, name: values.get(lookup, key[:1])})
            if page.status_code != 400 or run.pk in listed(page) or name not in page.content.decode():
                answered[name] = page.status_code
    assert not answered, f"the run list answered these lookups on the session instead of refusing them: {answered}"


def test_lookups_the_run_list_does_not_offer_are_refused(viewer: Client, root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)

    answered = {}
    for name in NOT_OFFERED:
        page = viewer.get(RUNS, {name: "h"})
        if page.status_code != 400 or run.pk in listed(page):
            answered[name] = page.status_code
    assert not answered, f"the run list answered lookups it does not offer: {answered}"


def test_the_links_the_admin_makes_to_the_run_list_still_filter_it(viewer: Client, root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)
    for query in [{"owner__id__exact": run.owner_id}, {"status": "awaiting_confirmation"}, {"spec": run.spec},
                  {"error__isnull": "True"}, {"quality_score__isnull": "True"}, {"model": run.model},
                  {"created_at__year": run.created_at.year}, {"owner__isnull": "False"}]:
        page = viewer.get(RUNS, query)
        assert page.status_code == 200, query
        assert run.pk in listed(page), query


def test_the_database_holds_no_session_key_of_any_run(root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)
    key = browser.cookies["sessionid"].value

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_jsonb(run)::text FROM assistant_agentrun AS run WHERE id = %s", [run.pk])
        [(stored,)] = cursor.fetchall()
        cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'assistant_agentrun'")
        columns = {name for (name,) in cursor.fetchall()}
    assert key not in stored
    assert key.encode().hex() not in stored  # nor as bytes
    assert "session_key" not in columns
    # And still the server knows, for the run's own requests, which session the message came from.
    assert SentFrom.of_run(AgentRun.objects.get(pk=run.pk)).session_key == key


def test_the_runs_page_shows_where_it_came_from_but_nothing_of_the_session(
    viewer: Client, root: Any, live_run: Send
) -> None:
    browser = signed_in_through_the_form("root")
    run = AgentRun.objects.get(pk=live_run(browser).pk)
    key = browser.cookies["sessionid"].value

    page = viewer.get(f"{RUNS}{run.pk}/change/").content.decode()

    secrets = (key, run.session_digest, bytes(run.session_sealed).hex())
    assert all(secrets)
    assert not [secret for secret in secrets if secret in page]
    assert key not in repr(SentFrom.of_run(run))
    # Nor where evidence is editable, to a superuser: no form field, no column of the CSV holds any of it.
    superuser = signed_in_through_the_form("root", login_url="/admin/login/")
    with assistant_settings_with(ADMIN_EVIDENCE_EDITABLE=True):
        form = superuser.get(f"{RUNS}{run.pk}/change/").content.decode()
        exported = b"".join(superuser.post(RUNS, {"action": "export_csv", "select_across": "1", "index": "0",
                                                  "_selected_action": run.pk}).streaming_content).decode()
    assert 'name="status"' in form  # the form is there, editable
    assert 'name="session' not in form and "session_digest" not in form and "session_sealed" not in form
    assert not [secret for secret in secrets if secret in form or secret in exported]
    assert str(run.pk) in exported


def test_signing_out_still_ends_the_runs_sent_from_that_session(root: Any, live_run: Send) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)
    other_browser = signed_in_through_the_form("root")
    other = live_run(other_browser, "delete Home, from my other tab", new_chat=True)

    assert browser.post("/logout/").status_code in (200, 302)

    run.refresh_from_db()
    other.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    assert other.status == "awaiting_confirmation"  # another session of the same person goes on
    assert not run.session_sealed  # an ended run keeps no way back to the session


def test_a_run_keeps_its_session_and_its_session_still_ends_it_after_the_secret_key_is_rotated(
    root: Any, live_run: Send
) -> None:
    browser = signed_in_through_the_form("root")
    run = live_run(browser)
    key = browser.cookies["sessionid"].value

    rotated = {"SECRET_KEY": "a-rotated-secret-key-" + "y" * 40, "SECRET_KEY_FALLBACKS": [settings.SECRET_KEY]}
    with override_settings(**rotated):
        assert SentFrom.of_run(AgentRun.objects.get(pk=run.pk)).session_key == key
        # What the socket's session watch (and the logout signal) does with the session key it holds.
        assert [ended.pk for ended in session_runs_end(session_key=key)] == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")


def test_a_run_sealed_under_a_secret_key_the_site_no_longer_has_acts_for_nobody(root: Any, live_run: Send) -> None:
    """A secret replaced without keeping the old one as a fallback signs everyone out (their sessions were
    signed with it); a run sealed under it is a run whose session ended, never one without a session."""
    browser = signed_in_through_the_form("root")
    run = live_run(browser)

    with override_settings(SECRET_KEY="an-entirely-new-secret-key-" + "z" * 40, SECRET_KEY_FALLBACKS=[]):
        stored = AgentRun.objects.get(pk=run.pk)
        with pytest.raises(SessionEnded):
            SentFrom.of_run(stored)
        with pytest.raises(SessionEnded):
            RunAuthority(stored).check()
        # The person signs in again: the runs of the session nobody can open any more end before they load.
        assert [ended.pk for ended in ended_sessions_runs_end(user=root)] == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
