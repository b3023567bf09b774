"""The assistant for an AG-UI frontend (CopilotKit, or any client of the AG-UI protocol): an optional sub-app.

A host installs the `ag-ui` extra (`ag-ui-protocol`, whose types encode every event) and adds `"assistant.agui"` to
`INSTALLED_APPS` (after `"assistant"`; the person's access tokens are accepted too where `"assistant.mcp"` is
installed), and includes its URL in the assistant's own include (`urls.py`, assistant/urls.py's `assistant_urls`) at
`ag-ui/` (`/assistant/ag-ui/` in this site). A POST of the protocol's `RunAgentInput` is answered with its event
stream (server-sent events), for a run of the person's that is the panel's in every way: stored, queued and worked
by the Celery worker, through the same executor, approvals and record (`assistant.agui.runs`), its events translated
from the panel's live events and rows (`assistant.agui.translate`) by a stream that holds no database connection
while it waits (`assistant.agui.stream`). docs/ag-ui.md says how a frontend connects and how the events map.
"""
