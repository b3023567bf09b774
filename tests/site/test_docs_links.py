"""Every relative link of the README, the changelog and the docs pages leads somewhere: to a file of this
repository and, with a #fragment, to a heading of that file (as GitHub makes its anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

PAGES = [PROJECT_DIR / "README.md", PROJECT_DIR / "CHANGELOG.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (outside code blocks)."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(PROJECT_DIR)) for page in PAGES])
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_readme_stays_an_overview() -> None:
    # The reference lives in docs/, one page per topic; the README says what, how to try it and how to add it.
    assert len((PROJECT_DIR / "README.md").read_text().splitlines()) < 400
    index = (PROJECT_DIR / "docs" / "index.md").read_text()
    listed = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    assert listed >= {page.name for page in (PROJECT_DIR / "docs").glob("*.md")} - {"index.md"}
