"""The check each optional sub-app makes that the host routes its URLs beside the assistant's own (its
`assistant_urls` include, assistant/urls.py). Kept apart from the URLconf, which imports the views and so the
models: a sub-app registers its checks before the models are ready."""

from __future__ import annotations

from django.core.checks import CheckMessage, Warning
from django.urls import NoReverseMatch, reverse


def _routed(url_name: str) -> bool:
    try:
        reverse(url_name)
    except NoReverseMatch:
        return False
    return True


def sub_app_unrouted(url_name: str, urls_module: str, *, message: str, check_id: str) -> list[CheckMessage]:
    """A sub-app's system check that its URLs are included beside the assistant's own: a project whose URLconf
    routes the assistant's pages and not `url_name` (an include written before the host included the sub-app's
    `urls_module`) answers 404 there. A URLconf without the assistant at all is not the sub-app's to judge."""
    if not _routed("assistant:page") or _routed(url_name):
        return []
    return [Warning(
        message,
        hint=f'Include it with the assistant\'s own, in the project\'s urls.py: `path("assistant/", '
             f'include(assistant_urls("{urls_module}")))`, with `from assistant.urls import assistant_urls` '
             "(the README's URLs step).",
        id=check_id)]
