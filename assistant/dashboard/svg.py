"""Charts as SVG drawn on the server, with no script: each an image (`role="img"`, a `<title>`, an
`aria-label` that says its numbers) with its bars, as links to their runs, laid over it."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


def format_number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _svg(width: int, height: int, title: str, label: str, body: Iterable[str],
         links: Iterable[str]) -> SafeString:
    """A chart that scales to its box: an image (`role="img"`, a title, an aria-label carrying the figures)
    and, laid over it, the same bars as links to their runs. The links are hidden from assistive technology
    and kept out of the tab order (an image holds no controls, and the table under the chart carries the
    same links for the keyboard and screen readers); they are there for the mouse."""
    box = f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg"'
    return mark_safe(  # noqa: S308 - every text below is escaped where it is put in
        f'<div class="dashboard-chart-box">'
        f'<svg class="dashboard-chart" {box} role="img" aria-label="{escape(label)}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
        f'<svg class="dashboard-chart-links" {box} aria-hidden="true">{"".join(links)}</svg></div>'
    )


def _bar(x: float, y: float, width: float, height: float, colour: str, href: str, tip: str) -> tuple[str, str]:
    """A bar, and its transparent twin that links to the runs it counts."""
    shape = f'x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}"'
    return (f'<rect {shape} fill="{colour}"/>',
            f'<a href="{escape(href)}" tabindex="-1"><rect {shape} fill="transparent">'
            f"<title>{escape(tip)}</title></rect></a>")


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 13) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="currentColor">{escape(text)}</text>')


def column_chart(*, title: str, summary: str, days: Sequence[datetime.date],
                 series: Sequence[tuple[str, str, Mapping[datetime.date, int]]],
                 href: Any) -> SafeString:
    """Columns a day, stacked by series (`(name, colour, values by day)`); `href(day, name)` links a part."""
    width, height, left, bottom, top = 600, 220, 52, 28, 12
    plot_width, plot_height = width - left - 8, height - bottom - top
    totals = [sum(values.get(day, 0) for _, _, values in series) for day in days]
    peak = max(totals, default=0) or 1
    slot = plot_width / max(len(days), 1)
    bar = max(slot * 0.75, 1)
    links: list[str] = []
    body = [
        f'<line x1="{left}" y1="{top + plot_height}" x2="{width - 8}" y2="{top + plot_height}" '
        f'stroke="currentColor" stroke-opacity="0.4"/>',
        _text(left - 6, top + 10, format_number(peak), anchor="end"),
        _text(left - 6, top + plot_height, "0", anchor="end"),
    ]
    label_every = max(1, len(days) // 7)
    for index, day in enumerate(days):
        x = left + index * slot + (slot - bar) / 2
        y = float(top + plot_height)
        for name, colour, values in series:
            value = values.get(day, 0)
            if not value:
                continue
            size = value / peak * plot_height
            y -= size
            shape, link = _bar(x, y, bar, size, colour, href(day, name), f"{day}: {format_number(value)} {name}")
            body.append(shape)
            links.append(link)
        if index % label_every == 0:
            body.append(_text(x + bar / 2, height - 10, day.strftime("%d %b"), anchor="middle", size=12))
    return _svg(width, height, title, summary, body, links)


def bar_list_chart(*, title: str, summary: str,
                   rows: Sequence[tuple[str, Sequence[tuple[float, str, str, str]]]]) -> SafeString:
    """Horizontal bars, one row per `(label, parts)`, each part `(value, colour, href, tip)` laid end to end."""
    row_height, label_width, width = 28, 210, 600
    height = max(len(rows), 1) * row_height + 8
    peak = max((sum(part[0] for part in parts) for _, parts in rows), default=0) or 1
    plot_width = width - label_width - 60
    body: list[str] = []
    links: list[str] = []
    for index, (label, parts) in enumerate(rows):
        y = 4 + index * row_height
        shown = label if len(label) <= 26 else f"{label[:25]}…"
        body.append(_text(label_width - 8, y + 18, shown, anchor="end"))
        x = float(label_width)
        for value, colour, href, tip in parts:
            if not value:
                continue
            size = value / peak * plot_width
            shape, link = _bar(x, y + 3, size, row_height - 8, colour, href, tip)
            body.append(shape)
            links.append(link)
            x += size
        body.append(_text(x + 6, y + 18, format_number(sum(part[0] for part in parts))))
    if not rows:
        body.append(_text(width / 2, 20, "nothing in this range", anchor="middle"))
    return _svg(width, height, title, summary, body, links)
