from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template import TemplateDoesNotExist, engines
from django.template.backends.django import DjangoTemplates
from django.template.loader import get_template
from django.urls import reverse
from django.utils.text import Truncator
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from assistant.attachments.store import (
    AttachmentRefused,
    attachment_get,
    attachment_payload,
    attachment_store,
    is_image,
    is_text,
    refuse_declared_size,
)
from assistant.conf import assistant_settings
from assistant.context_processors import model_label
from assistant.memory.store import MemoryNotFound, memories_clear, memories_list, memory_delete
from assistant.templatetags.assistant import FULL_PAGE_FLAG

_BLOCK_NAME = re.compile(r"\w+")
_MARKER = "data-assistant-conversation"
_MEMORIES_MARKER = 'data-assistant-page="memories"'
MEMORIES_PER_PAGE = 25
#: A search longer than this is cut: nobody types it, and it would only make the query slower.
MEMORY_QUERY_MAX = 200
MEMORY_QUERY_NUL = "Searches cannot contain the NUL character, so no memory matches this one."


@login_required
def assistant_page(request: HttpRequest) -> HttpResponse:
    """The assistant as a full page: a page of its own, or the content of the host's layout when
    `ASSISTANT["PAGE_LAYOUT"]` names that layout's template and block."""
    context = {FULL_PAGE_FLAG: True, **model_label()}
    return _render_page(
        request, standalone="assistant/page.html", content="assistant/page_content.html", context=context,
        marker=_MARKER,
    )


@login_required
@require_safe
def memories_page(request: HttpRequest) -> HttpResponse:
    """What the assistant remembers of the signed-in person, newest first, a page at a time; `?q=` keeps
    only the memories whose text contains the words as typed, ignoring case."""
    query = _memory_query(request.GET.get("q"))
    everything = memories_list(owner=request.user)
    found = memories_list(owner=request.user, query=query) if query else everything
    page = Paginator(found, MEMORIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "memories": page.object_list,
        # A NUL is no character a page can show (nor one PostgreSQL can search for): the box shows U+FFFD
        # where it was, and the page says why nothing matches.
        "query": query.replace("\x00", "\ufffd"),
        "query_problem": MEMORY_QUERY_NUL if "\x00" in query else "",
        "total": everything.count() if query else page.paginator.count,
        "previous_url": _memories_url(query, page.previous_page_number()) if page.has_previous() else "",
        "next_url": _memories_url(query, page.next_page_number()) if page.has_next() else "",
    }
    return _render_memories(request, "assistant/memories_content.html", context, title="Memories")


@login_required
@require_POST
def memory_delete_view(request: HttpRequest, memory_id: int) -> HttpResponse:
    """Forget one memory of the signed-in person's; anyone else's is not found, and stays."""
    try:
        memory = memory_delete(owner=request.user, memory_id=memory_id)
    except MemoryNotFound:
        raise Http404("No such memory.") from None
    gist = Truncator(" ".join(memory.content.split())).chars(80)
    messages.success(request, f"Deleted the memory “{gist}”.", fail_silently=True)
    # Back to the same search and page; a page that is now past the end shows the last one. No list has
    # a page number of more than 18 digits, and int() refuses past 4,300: longer ones go to the first page.
    page = request.POST.get("page", "")
    number = int(page) if page.isascii() and page.isdigit() and len(page) <= 18 else None
    return HttpResponseRedirect(_memories_url(_memory_query(request.POST.get("q")), number))


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def memories_clear_view(request: HttpRequest) -> HttpResponse:
    """GET asks whether to forget everything (and changes nothing); POST, from that question's form, does."""
    if request.method == "POST":
        deleted = memories_clear(owner=request.user)
        text = f"Deleted all {deleted} memories." if deleted != 1 else "Deleted the one memory."
        messages.success(request, text if deleted else "There were no memories to delete.", fail_silently=True)
        return HttpResponseRedirect(reverse("assistant:memories"))
    context = {"total": memories_list(owner=request.user).count()}
    return _render_memories(request, "assistant/memories_clear.html", context, title="Delete all memories")


def _memory_query(raw: str | None) -> str:
    return (raw or "").strip()[:MEMORY_QUERY_MAX]


def _memories_url(query: str, page: int | None) -> str:
    """The memories page's address for a search and a page, with neither when they are the defaults."""
    params = {key: value for key, value in (("q", query), ("page", page)) if value}
    url = reverse("assistant:memories")
    return f"{url}?{urlencode(params)}" if params else url


def _render_memories(request: HttpRequest, content: str, context: dict[str, Any], *, title: str) -> HttpResponse:
    # On a page of its own nothing else shows Django's messages, so the page does; inside the host's
    # layout the layout shows them, as on the host's other pages.
    standalone_extra = {"assistant_messages": messages.get_messages(request)}
    return _render_page(
        request, standalone="assistant/memories.html", content=content, marker=_MEMORIES_MARKER,
        context={"assistant_content": content, "assistant_title": title, **context},
        standalone_context=standalone_extra,
    )


def _render_page(
    request: HttpRequest, *, standalone: str, content: str, context: dict[str, Any], marker: str,
    standalone_context: dict[str, Any] | None = None,
) -> HttpResponse:
    """One of the assistant's pages: `standalone` (a whole document) when the project names no layout,
    else `content` filling the block of the layout `ASSISTANT["PAGE_LAYOUT"]` names. `marker` is a string
    the content always renders, which proves the layout showed the block."""
    layout = assistant_settings.PAGE_LAYOUT
    if layout is None:
        return render(request, standalone, {**context, **(standalone_context or {})})
    template_name, block = _page_layout(layout)
    # A block's name cannot be a variable, so the page is a two-line template made here; the name was
    # checked to be a plain identifier, and the templates' names travel as variables.
    source = f"{{% extends assistant_layout %}}{{% block {block} %}}{{% include assistant_include %}}{{% endblock %}}"
    html = _django_engine().from_string(source).render(
        {**context, "assistant_layout": template_name, "assistant_include": content}, request
    )
    if marker not in html:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] names the block {block!r}, which {template_name!r} does not render; '
            "name a block the layout shows, such as the one its pages fill with their content."
        )
    return HttpResponse(html)


def _page_layout(layout: Any) -> tuple[str, str]:
    """The layout's template name and block, or a configuration error that says what to write."""
    example = '{"template": "base.html", "block": "content"}'
    if not isinstance(layout, dict) or set(layout) != {"template", "block"}:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] must be None or a dict with a template and a block, e.g. {example}; '
            f"got {layout!r}."
        )
    template_name, block = layout["template"], layout["block"]
    if not isinstance(block, str) or not _BLOCK_NAME.fullmatch(block):
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"]["block"] must be a block name (letters, digits, _); got {block!r}.'
        )
    if not isinstance(template_name, str) or not template_name:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"]["template"] must be a template name; got {template_name!r}.'
        )
    try:
        get_template(template_name)
    except TemplateDoesNotExist as missing:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] names the template {template_name!r}, which no template loader finds.'
        ) from missing
    return template_name, block


def _django_engine() -> Any:
    for engine in engines.all():
        if isinstance(engine, DjangoTemplates):
            return engine
    raise ImproperlyConfigured('ASSISTANT["PAGE_LAYOUT"] needs the Django template engine in TEMPLATES.')


@require_POST
def attachment_upload_view(request: HttpRequest) -> JsonResponse:
    """Take a file the person will send with their next message (multipart field `file`): 201 with the
    attachment, or the refusal in words (400, 413, 415) with nothing stored. Signed-in people only; CSRF-checked
    as any form of the site."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": "not_signed_in", "message": "Sign in to attach files."}, status=403)
    try:
        # Before the body is read: an upload far over the limit is refused without being taken in.
        refuse_declared_size(request.META.get("CONTENT_LENGTH"))
        attachment = attachment_store(user=request.user, upload=request.FILES.get("file"))
    except AttachmentRefused as refused:
        return JsonResponse({"error": refused.code, "message": refused.message}, status=refused.status)
    return JsonResponse({"attachment": attachment_payload(attachment)}, status=201)


@login_required
@require_safe
def attachment_file_view(request: HttpRequest, attachment_id: int) -> FileResponse:
    """The person's own attachment, to them alone (anyone else's is as missing). A picture opens in the browser;
    anything else downloads, and nothing is ever rendered as a page of this site (HTML comes back as text)."""
    attachment = attachment_get(user=request.user, attachment_id=attachment_id)
    if attachment is None:
        raise Http404("No such attachment.")
    shown_inline = is_image(attachment)
    response = FileResponse(attachment.file.open("rb"), as_attachment=not shown_inline, filename=attachment.name,
                            content_type=attachment.content_type if shown_inline else
                            ("text/plain; charset=utf-8" if is_text(attachment) else "application/octet-stream"))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'; img-src 'self'"
    response["Cache-Control"] = "private, no-store"
    return response
