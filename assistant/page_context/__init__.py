"""Page context: the page the person has the panel open on, as the assistant may see it, and what it can
do there.

`@shows(Model, kwarg=...)` (assistant.tools) says which object a view's page shows when the view does not say it itself;
`page_context(user, path)` reads that object as the person; `suggestions(user, spec, context)` offers a
few requests the person may make there. See docs/page-context.md.
"""

from __future__ import annotations

from assistant.page_context.read import PageContext, page_context
from assistant.page_context.resolve import BadPage, clean_path, page_subject
from assistant.page_context.suggestions import Suggestion, suggestions, usable_tools

__all__ = ["BadPage", "PageContext", "Suggestion", "clean_path", "page_context", "page_subject", "suggestions",
           "usable_tools"]
