"""The access tokens page in a real browser, by keyboard: reached from the dock's toolbar (which still fits
on one line), a token made and shown focused, revoked; axe-core finds nothing serious in light or dark."""

from __future__ import annotations

from typing import Any

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import TokenRefused, token_authenticate
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, log_in

pytestmark = BROWSER_MARKS


def test_a_person_makes_and_revokes_a_token_from_the_panel_by_keyboard(page: Any, site_url: str, alice: Any) -> None:
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    link = page.locator("#assistant-dock [data-assistant-tokens]")
    link.wait_for()
    # The toolbar holds its buttons and both links on one line, in the dock's width.
    assert page.evaluate("""() => { const bar = document.querySelector('#assistant-dock .assistant-toolbar');
        return bar.scrollWidth <= bar.clientWidth; }""")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(site_url + "/assistant/tokens/")

    page.focus("#assistant-token-name")
    page.keyboard.type("Claude Desktop")
    page.keyboard.press("Tab")  # the spec
    page.keyboard.press("Tab")  # read-only
    page.keyboard.press("Space")
    page.keyboard.press("Enter")  # submits the form
    page.wait_for_selector("#assistant-token-secret")

    # The new token has the focus, ready to copy, and it works.
    assert page.evaluate("() => document.activeElement.id") == "assistant-token-secret"
    secret = page.input_value("#assistant-token-secret")
    user, token = token_authenticate(secret)
    assert (user, token.name, token.read_only) == (alice, "Claude Desktop", True)

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, '[data-assistant-page="tokens"]')
        assert not found, f"[{scheme}]\n{describe_violations(found)}"

    page.focus(f"#assistant-token-{token.pk}-revoke")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Revoked the token “Claude Desktop”")
    assert AccessToken.objects.get().revoked_at is not None
    try:
        token_authenticate(secret)
    except TokenRefused as refused:
        assert refused.reason == "revoked"
    else:
        raise AssertionError("a revoked token still acts")
    assert page.locator("#assistant-token-secret").count() == 0
