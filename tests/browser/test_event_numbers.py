"""The panel counts the person's events (`event_seq`) and reloads when one is missing, in Chromium through
daphne and the channel layer.

A lost event is made the way it happens: the change is in the database, and its number was taken (the
person's count in Redis went up by one) but nothing reached the socket. The next event that does arrive
shows the gap; the panel must then reload and show the change. The count lost altogether (Redis
restarted) starts again at 1, which must not leave the panel blind to the next loss."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from assistant.conversation import services
from assistant.infra.redis_connection import redis_client
from assistant.live.events import event_seq_key, publisher
from assistant.models import AgentChat
from tests.browser.harness import BROWSER_MARKS, log_in

pytestmark = BROWSER_MARKS

PAGE = ".assistant-surface-page"
WAIT = 10_000  # ms: the panel waits 1.5 s for a missing number before it reloads

# Every assistant.load the page sends, counted, and every request it sends (a load, the list of chats) until
# its answer comes back, before the page's own scripts run.
COUNT_LOADS = """
(() => {
  window.__loads = 0;
  window.__unanswered = new Set();
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (!this.__answersFollowed) {
      this.__answersFollowed = true;
      this.addEventListener("message", (message) => {
        try { window.__unanswered.delete(JSON.parse(message.data).request_id); } catch (error) { /* not JSON */ }
      });
    }
    try {
      const request = JSON.parse(data);
      if (request.type === "assistant.load") window.__loads += 1;
      if (request.request_id) window.__unanswered.add(request.request_id);
    } catch (error) { /* not JSON */ }
    return send.call(this, data);
  };
})();
"""


def _sequence(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """(selector) => {
            const sequence = document.querySelector(selector).assistantConversation.sequence;
            return {last: sequence.last, gaps: sequence.gaps, restarts: sequence.restarts, loads: window.__loads,
                    waiting: Object.keys(sequence.waiting).length};
        }""",
        PAGE,
    )


def _lose_one_event(chat: AgentChat, title: str) -> None:
    """The chat's new title is stored, and its event is lost after taking its number."""
    AgentChat.objects.filter(pk=chat.pk).update(title=title)
    redis_client().incr(event_seq_key(chat.owner_id))


def _rename(user: Any, chat: AgentChat, title: str) -> None:
    """An event that does arrive (the rename of another chat), from this process as a web process sends it."""
    services.chat_rename(user=user, chat_id=chat.pk, title=title)
    assert publisher.flush(timeout=5)


def test_a_missing_number_makes_the_panel_reload_and_a_count_begun_again_does_not_blind_it(
    page: Any, site_url: str, alice: Any
) -> None:
    other = AgentChat.objects.create(owner=alice, title="Older chat")
    shown = AgentChat.objects.create(owner=alice, title="Groceries")  # the newest: the current chat
    page.add_init_script(COUNT_LOADS)
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    title = page.locator(f"{PAGE} [data-assistant-chat-title]")
    expect(title).to_have_text("Groceries", timeout=WAIT)
    page.wait_for_function(f"document.querySelector('{PAGE}').assistantConversation.sequence.last !== null")

    # Events that all arrive, in order: counted, and nothing is reloaded for them.
    loads = _sequence(page)["loads"]
    start = _sequence(page)["last"]
    _rename(alice, other, "Older chat, renamed")
    expect(page.locator(f"{PAGE} [data-assistant-chat-list]")).to_contain_text("Older chat, renamed", timeout=WAIT)
    # Shown, so counted (the page counts an event before it shows it), and no number waits for one before
    # it: no reload is due later either.
    assert _sequence(page) == {"last": start + 1, "gaps": 0, "restarts": 0, "loads": loads, "waiting": 0}

    # One event lost: the next one shows the gap, and the panel reloads the chat it shows.
    _lose_one_event(shown, "Groceries and drinks")
    _rename(alice, other, "Older chat, renamed again")
    expect(title).to_have_text("Groceries and drinks", timeout=WAIT)
    after_gap = _sequence(page)
    assert (after_gap["gaps"], after_gap["last"]) == (1, start + 3) and after_gap["loads"] == loads + 1

    # Redis lost the count (a restart): it begins again at 1. The panel starts afresh and reloads...
    redis_client().delete(event_seq_key(alice.pk))
    AgentChat.objects.filter(pk=shown.pk).update(title="Groceries, after the restart")
    _rename(alice, other, "Older chat, after the restart")
    expect(title).to_have_text("Groceries, after the restart", timeout=WAIT)
    assert _sequence(page)["restarts"] == 1 and _sequence(page)["last"] == 1
    # Everything the restart asked for (the chat, the list of chats) has been answered: an answer still under
    # way after the next loss would cover it (rightly: it is read after it), and would show its title first.
    page.wait_for_function("window.__unanswered.size === 0", timeout=WAIT)

    # ...and still catches the next loss.
    _lose_one_event(shown, "Groceries, caught again")
    _rename(alice, other, "Older chat, once more")
    page.wait_for_function(f"document.querySelector('{PAGE}').assistantConversation.sequence.gaps === 2",
                           timeout=WAIT)
    expect(title).to_have_text("Groceries, caught again", timeout=WAIT)
    assert _sequence(page)["gaps"] == 2 and _sequence(page)["last"] == 3
