from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def assistant_page(request: HttpRequest) -> HttpResponse:
    """The assistant as a full page, in the site's own shell."""
    return render(request, "assistant/page.html")
