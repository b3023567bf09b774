"""Which pages of this site a reply may link to: those its person can open.

A model names the app's objects, and tool results give it each object's page (`get_absolute_url()`, as `url`,
assistant/tools/reads.py) to link them with. What it writes is checked before the reply is kept, as the person:
a link to a page that shows an object stays a link only when they can read that object through a declared read
(assistant/page_context/, the same reading the page they have open gets); a link to a page that shows no object
stays one when the address is a page of the site at all, whose own rules apply when it is opened. Any other link
to the site is shown as its text (assistant/live/markdown.py): the reply never points at what its person cannot
see, whatever the model wrote or read.
"""

from __future__ import annotations

from typing import Any

from django.urls import Resolver404, resolve

from assistant.live.markdown import site_links
from assistant.page_context.read import page_context
from assistant.page_context.resolve import BadPage, clean_path, page_subject

#: A reply's links checked at most; any further link to the site is shown as its text. Each check is a read.
MAX_LINKS_CHECKED = 20


def may_open(user: Any, address: str) -> bool:
    """Whether `address`, a path of this site, is a page `user` can open: one that shows an object they can
    read, or one that shows no object."""
    try:
        path = clean_path(address)
        resolve(path)
        subject = page_subject(path)
    except (BadPage, Resolver404):
        return False
    return subject is None or page_context(user, path) is not None


def openable_links(user: Any, reply: str) -> list[str]:
    """The addresses on this site `reply` links to that `user` can open, in the order it links them."""
    return [address for address in site_links(reply)[:MAX_LINKS_CHECKED] if may_open(user, address)]
