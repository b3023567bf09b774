"""A reply's Markdown as HTML that is safe to put in the page.

Two independent layers, so that a mistake in one is caught by the other:

1. markdown-it-py renders CommonMark plus tables and strikethrough with raw HTML off: whatever HTML a
   model writes is shown as text. Images are rendered as a link labelled with their alt text, never as
   `<img>`, so showing a reply makes no request to anywhere the model chose.
2. nh3 keeps only an allow-list of tags and attributes from what markdown-it-py produced: links only to
   http, https and mailto, or to a path on this site (`/tracker/projects/3/`: the assistant lives inside
   the app and points at its pages), each with `rel="noopener noreferrer nofollow"`; a code block's language only
   as a plain `language-…` class; a table cell's alignment only as `text-align`.

Rendering is bounded: the HTML travels in live events, whose strings are cut at
`MAX_EVENT_STRING_CHARS` (a cut in the middle of a tag would show broken markup), so at most
`MAX_SOURCE_CHARS` of the Markdown are rendered and the HTML never exceeds `MAX_HTML_CHARS`; what is
left out is named in a closing note. Pathological input (tens of thousands of `![`) renders in
linear time, a few hundred milliseconds at the bound; ordinary prose in a few milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from html import escape, unescape
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token

from assistant.live.events import MAX_EVENT_STRING_CHARS
from assistant.tools.reads import SITE_PATH

MAX_HTML_CHARS = MAX_EVENT_STRING_CHARS
MAX_SOURCE_CHARS = 16_000  # most Markdown fits MAX_HTML_CHARS as HTML in one rendering

ALLOWED_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a",
})
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"class"},
    "th": {"style"},
    "td": {"style"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
# What markdown-it-py writes for a fenced block's info string: `language-` and the first word.
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
# A link nh3 calls relative is kept only as a path from this site's root (SITE_PATH), not a path relative to
# whichever page the panel is docked on.
_ABSOLUTE = re.compile(r"(?:https?|mailto):", re.IGNORECASE)


def link_kept(href: str) -> str | None:
    """A link's address as sanitised HTML may keep it: the web, mail, or a path of this site; None otherwise."""
    return href if _ABSOLUTE.match(href) or SITE_PATH.fullmatch(href) else None


def _keep_attribute(tag: str, name: str, value: str) -> str | None:
    if tag == "code" and name == "class":
        return value if _LANGUAGE_CLASS.fullmatch(value) else None
    if tag == "a" and name == "href":
        return link_kept(value)
    return value


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """`![alt](url)` as a link to the image labelled with its alt text (the address itself when there is
    none): the person may open it, the page never loads it. Inside a link, the alt text alone."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    inside_link = sum(t.nesting for t in tokens[:idx] if t.type in ("link_open", "link_close")) > 0
    if inside_link:
        return escape(alt, quote=False)
    src = str(token.attrGet("src") or "")
    title = token.attrGet("title")
    title_attr = f' title="{escape(str(title))}"' if title else ""
    return f'<a href="{escape(src)}"{title_attr}>{escape(alt or src, quote=False)}</a>'


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


_md = _markdown()


def _sanitise(html: str) -> str:
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_keep_attribute,
        filter_style_properties={"text-align"},
        url_schemes=set(URL_SCHEMES),
        url_relative="pass_through",  # then narrowed to site paths by _keep_attribute
        link_rel=LINK_REL,
        strip_comments=True,
    )


def _rest_note(left_out: int) -> str:
    return f"<p><em>… ({left_out} more characters not shown)</em></p>"


# An anchor as _sanitise writes it (attributes double-quoted, never nested), and its address.
_ANCHOR = re.compile(r"<a\b([^>]*)>(.*?)</a>", re.DOTALL)
_HREF = re.compile(r'\bhref="([^"]*)"')


def _href(attributes: str) -> str | None:
    found = _HREF.search(attributes)
    return unescape(found.group(1)) if found else None


def site_links(text: str) -> list[str]:
    """The addresses on this site that `text` (a reply's Markdown) links to once rendered, in order, each once."""
    hrefs = (_href(match.group(1)) for match in _ANCHOR.finditer(render_markdown(text)))
    return list(dict.fromkeys(href for href in hrefs if href is not None and SITE_PATH.fullmatch(href)))


def _only_links_to(html: str, openable: frozenset[str]) -> str:
    """`html` with each link to a page of this site not in `openable` left as its text: what the person may not
    open (or what nobody checked) is named, never linked."""
    def keep(match: re.Match[str]) -> str:
        href = _href(match.group(1))
        if href is None or not SITE_PATH.fullmatch(href) or href in openable:
            return match.group(0)
        return match.group(2)
    return _ANCHOR.sub(keep, html)


@lru_cache(maxsize=128)
def render_markdown(text: str, openable: frozenset[str] | None = None) -> str:
    """`text` (a reply's Markdown) as sanitised HTML of at most MAX_HTML_CHARS characters. `openable`: the pages
    of this site it may link to (checked as its person when it was written, assistant/live/links.py); a link to
    any other page of the site is left as its text. None: every page of the site (a reply written before
    links were checked, or staff's view of one).

    Replies are rendered again on every load of their chat; the cache keeps that to one rendering per
    distinct reply and process."""
    if openable is not None:
        return _only_links_to(render_markdown(text), openable)
    source = text[:MAX_SOURCE_CHARS]
    for _ in range(4):
        left_out = len(text) - len(source)
        html = _sanitise(_md.render(source)) + (_rest_note(left_out) if left_out else "")
        if len(html) <= MAX_HTML_CHARS:
            return html
        # Markup makes HTML longer than its Markdown: render a proportionally shorter beginning.
        source = source[: int(len(source) * MAX_HTML_CHARS * 0.9 / len(html))]
    # Markup so dense that even that did not fit: the beginning as plain text.
    plain = text[: MAX_HTML_CHARS // 8]
    return f"<p>{escape(plain)}</p>" + _rest_note(len(text) - len(plain))
