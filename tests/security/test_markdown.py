"""A reply's Markdown becomes HTML that the panel puts into the page: whatever a model writes (or repeats
from a web page, a tool result or a memory) must not run script, load anything, or link anywhere but
http, https and mailto. Asserted on the HTML as a browser's parser reads it, not on substrings."""

from __future__ import annotations

import time
from dataclasses import dataclass
from html.parser import HTMLParser

import pytest

from assistant.live.markdown import MAX_HTML_CHARS, render_markdown

SAFE_SCHEMES = ("http:", "https:", "mailto:")
SCRIPTABLE_TAGS = {"script", "iframe", "img", "svg", "math", "object", "embed", "style", "link", "meta", "form",
                   "input", "button", "base", "frame", "frameset", "video", "audio", "source", "image"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    text: str = ""


class Parsed(HTMLParser):
    """Every element with its attributes and the text inside it, as a browser's tokenizer reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.text = ""
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.elements.append(element)
        self._open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.text += data
        for element in self._open:
            element.text += data

    def tags(self, name: str) -> list[Element]:
        return [element for element in self.elements if element.tag == name]


def parse(html: str) -> Parsed:
    parsed = Parsed()
    parsed.feed(html)
    parsed.close()
    return parsed


def assert_harmless(html: str) -> Parsed:
    """Nothing in `html` runs script, loads a resource, or links outside http/https/mailto."""
    parsed = parse(html)
    for element in parsed.elements:
        assert element.tag not in SCRIPTABLE_TAGS, (element, html)
        for name, value in element.attrs.items():
            assert not name.startswith("on"), (element, html)
            assert name not in {"src", "srcset", "style", "formaction", "action", "background", "xlink:href"} or (
                name == "style" and element.tag in {"th", "td"} and value and value.startswith("text-align:")
            ), (element, html)
            if name == "href":
                # What a browser would follow: control characters and spaces are ignored in a scheme.
                scheme = "".join(ch for ch in (value or "") if ch > " ").lower()
                site_path = scheme.startswith("/") and not scheme.startswith(("//", "/\\"))
                assert scheme.startswith(SAFE_SCHEMES) or site_path, (element, html)
        if element.tag == "a":
            assert element.attrs.get("rel") == "noopener noreferrer nofollow", (element, html)
    return parsed


XSS_PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](jav&#x61;script:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "<svg onload=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    "<iframe src=\"https://evil.example/\"></iframe>",
    "![a](http://evil/x.png)",
    "![a](http://evil/x.png \"t\" onerror=alert(1))",
    "![a](javascript:alert(1))",
    "![a](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<javascript:alert(1)>",
    "<http://a.example/\"onmouseover=\"alert(1)>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;img src=x onerror=alert(1)&#62;",
    '[x](https://a.example "a\\" onmouseover=\\"alert(1)")',
    '[x](https://a.example \'t" onclick="alert(1)\')',
    "[x][ref]\n\n[ref]: javascript:alert(1)",
    "<a href=\"javascript:alert(1)\">x</a>",
    "<div style=\"background:url(javascript:alert(1))\">x</div>",
    "```\"><img src=x onerror=alert(1)>\ncode\n```",
    "```js onclick=alert(1)\ncode\n```",
    "<!-- <img src=x onerror=alert(1)> -->",
    "[![a](http://evil/x.png)](javascript:alert(1))",
    "[x](//evil.example/path)",
    "[x](/relative/path)",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
]


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_a_hostile_reply_renders_to_html_that_runs_nothing_and_loads_nothing(payload: str) -> None:
    assert_harmless(render_markdown(payload))
    # Also when it sits inside Markdown structures that render differently.
    for wrapped in (f"> {payload}", f"- {payload}", f"| a |\n|---|\n| {payload} |", f"**{payload}**"):
        assert_harmless(render_markdown(wrapped))


def test_raw_html_is_shown_as_the_text_the_model_wrote() -> None:
    parsed = assert_harmless(render_markdown("<script>alert(1)</script> and <b>bold</b>"))
    assert "<script>alert(1)</script>" in parsed.text
    assert not parsed.tags("b")


def test_a_markdown_image_is_a_link_labelled_with_its_alt_text_never_an_image() -> None:
    parsed = assert_harmless(render_markdown("See ![the chart](https://img.example/chart.png)."))
    [link] = parsed.tags("a")
    assert link.attrs["href"] == "https://img.example/chart.png"
    assert link.text == "the chart"
    assert not parsed.tags("img")
    # Without alt text the address itself is the label; a data: image is a label without a link.
    [bare] = parse(render_markdown("![](https://img.example/x.png)")).tags("a")
    assert bare.text == "https://img.example/x.png"
    [inline] = assert_harmless(render_markdown("![pixel](data:image/png;base64,AAAA)")).tags("a")
    assert "href" not in inline.attrs and inline.text == "pixel"


def test_a_quote_in_a_link_title_stays_inside_the_title() -> None:
    parsed = assert_harmless(render_markdown('[x](https://a.example "say \\"hi\\" onclick=alert(1)")'))
    [link] = parsed.tags("a")
    assert link.attrs["title"] == 'say "hi" onclick=alert(1)'
    assert set(link.attrs) == {"href", "title", "rel"}


def test_entities_and_autolinks_render_as_text_and_safe_links() -> None:
    parsed = assert_harmless(render_markdown("Tom &amp; Jerry &lt;b&gt; <https://a.example/x> <mailto:me@a.example>"))
    assert "Tom & Jerry <b>" in parsed.text
    assert [a.attrs["href"] for a in parsed.tags("a")] == ["https://a.example/x", "mailto:me@a.example"]


def test_links_to_other_schemes_or_page_relative_addresses_keep_their_text_but_lead_nowhere() -> None:
    for markdown in ("[proto](//evil.example/)", "[ftp](ftp://a.example/)",
                     "[page](projects/3/)", "[up](../admin/)", "[q](?next=x)"):
        parsed = assert_harmless(render_markdown(markdown))
        assert all("href" not in a.attrs for a in parsed.tags("a")), markdown


def test_a_link_to_a_page_of_this_site_leads_there() -> None:
    [link] = assert_harmless(render_markdown("Open [Home](/tracker/projects/3/?tab=tasks#open).")).tags("a")
    assert link.attrs["href"] == "/tracker/projects/3/?tab=tasks#open"
    assert link.attrs["rel"] == "noopener noreferrer nofollow"
    # `/\host` is another host to a browser; Markdown escapes the backslash, which keeps it a path here.
    [escaped] = assert_harmless(render_markdown("[back](/\\evil.example/)")).tags("a")
    assert escaped.attrs["href"] == "/%5Cevil.example/"


REPLY = """# Your tasks

Here is **what is open** in *Home*, ~~nothing~~ something:

1. Buy milk
2. Call `mum`

- a bullet
  - nested

> A quote.

| Task | Due |
|:-----|----:|
| Buy milk | today |

```python
print("<hi>")
```

See [the docs](https://docs.example/tasks "Tasks").
"""


def test_the_features_a_reply_uses_render() -> None:
    parsed = assert_harmless(render_markdown(REPLY))
    assert parsed.tags("h1")[0].text == "Your tasks"
    assert parsed.tags("strong")[0].text == "what is open" and parsed.tags("em")[0].text == "Home"
    assert parsed.tags("s")[0].text == "nothing"
    assert [li.text.strip() for li in parsed.tags("li")][:2] == ["Buy milk", "Call mum"]
    assert parsed.tags("ol")
    assert len(parsed.tags("ul")) == 2  # a nested list
    assert parsed.tags("blockquote")[0].text.strip() == "A quote."
    assert [th.text for th in parsed.tags("th")] == ["Task", "Due"]
    assert [td.text for td in parsed.tags("td")] == ["Buy milk", "today"]
    assert parsed.tags("th")[1].attrs["style"] == "text-align:right"
    [code] = [c for c in parsed.tags("code") if c.attrs.get("class")]
    assert code.attrs["class"] == "language-python" and code.text == 'print("<hi>")\n'
    assert parsed.tags("pre")
    [link] = parsed.tags("a")
    assert (link.attrs["href"], link.attrs["title"], link.text) == ("https://docs.example/tasks", "Tasks", "the docs")


ORDINARY_REPLY = ("Some **bold** text, `code` and a [link](https://a.example/?q=1).\n\n" * 1000)[:60_000]
PATHOLOGICAL_REPLIES = [
    ("open images", "![" * 30_000),
    ("open brackets", "[" * 60_000),
    ("emphasis", "*a_" * 20_000),
    ("table", "|a|b|\n|-|-|\n" + "|x|y|\n" * 10_000),
    ("escapes", "<&\"" * 20_000),
]


def fresh(reply: str) -> str:
    return reply + f" {time.monotonic_ns()}"  # not a cached rendering from an earlier test


def quickest_renderings(*replies: str, tries: int = 3) -> list[float]:
    """Seconds each reply takes to render: the quickest of a few fresh renderings, taken in turns so that
    all see the same load (a busy machine only adds time)."""
    best = [float("inf")] * len(replies)
    for _ in range(tries):
        for index, reply in enumerate(replies):
            text = fresh(reply)
            started = time.perf_counter()
            render_markdown(text)
            best[index] = min(best[index], time.perf_counter() - started)
    return best


@pytest.mark.parametrize("name, reply", [("prose", ORDINARY_REPLY), *PATHOLOGICAL_REPLIES])
def test_a_60000_character_reply_is_cut_to_the_event_bound(name: str, reply: str) -> None:
    html = render_markdown(fresh(reply))
    assert len(html) <= MAX_HTML_CHARS
    parsed = assert_harmless(html)
    assert "more characters not shown" in parsed.text  # what was left out is said, not silently dropped


@pytest.mark.parametrize("name, reply", PATHOLOGICAL_REPLIES)
def test_a_pathological_60000_character_reply_renders_about_as_fast_as_an_ordinary_one(name: str, reply: str) -> None:
    # Against ordinary prose of the same length, timed in the same test: these render within a few times its
    # time (at most 7 here), where rendering that grew with the square of the length would take thousands.
    ordinary, pathological = quickest_renderings(ORDINARY_REPLY, reply)
    assert pathological < 25 * ordinary, f"{name}: {pathological:.3f}s, ordinary prose {ordinary:.3f}s"
