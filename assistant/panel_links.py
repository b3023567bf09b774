"""The links an optional sub-app adds to the panel's toolbar, after the core's own (Memories): the MCP app's
"Tokens" to the person's access tokens. Each sub-app registers its links in its AppConfig.ready(), so the core's
templates name none of its URLs; a link shows where its URL is routed (the host includes the sub-app's URLs),
as `{% url ... as ... %}` finds it, and nowhere else."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A bare data attribute, written into the link's tag as it is: nothing in it needs escaping.
_DATA_ATTRIBUTE = re.compile(r"data-[a-z][a-z0-9-]*")


@dataclass(frozen=True)
class PanelLink:
    """A link of the panel's toolbar: its text, the URL name it is reversed from, and the data attribute by which
    the panel's scripts and tests find it (`data-assistant-tokens`)."""

    label: str
    url_name: str
    data_attribute: str

    def __post_init__(self) -> None:
        if not _DATA_ATTRIBUTE.fullmatch(self.data_attribute):
            raise ValueError(f"{self.data_attribute!r} is not a data attribute such as 'data-assistant-tokens'.")


_PANEL_LINKS: list[PanelLink] = []


def register_panel_link(link: PanelLink) -> None:
    """Show `link` in the panel's toolbar, after those registered before it (the apps' order in INSTALLED_APPS).
    Registering the same link again (a ready() run twice) changes nothing."""
    if link not in _PANEL_LINKS:
        _PANEL_LINKS.append(link)


def panel_links() -> tuple[PanelLink, ...]:
    """The registered links, in their order."""
    return tuple(_PANEL_LINKS)
