"""What a host site puts in front of its views, as the tests need it: gates keyed on the session.

A session flagged `testapp_needs_2fa` is sent to a verification page before any view runs (as a
second-factor middleware would), and one flagged `testapp_maintenance` gets 503 for every write (as a
maintenance switch would). Sessions without the flags pass untouched, so the rest of the suite is unaffected.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

VERIFY_PATH = "/verify-second-factor/"


class SessionGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.session.get("testapp_needs_2fa"):
            return HttpResponseRedirect(VERIFY_PATH)
        if request.session.get("testapp_maintenance") and request.method == "POST":
            return HttpResponse("Down for maintenance.", status=503)
        return self.get_response(request)
