"""What the AG-UI sub-app checks at start-up: that the protocol's package is there, in a version that has the
events the endpoint sends (the interrupt outcome of RUN_FINISHED, the `resume` of RunAgentInput, the subagent
events of AG-UI 1.0), and that a host that routes the assistant's pages routes the endpoint too."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register

from assistant.infra.sub_app_urls import sub_app_unrouted

#: What the endpoint uses of `ag_ui.core`, beyond the events every version has.
NEEDED = ("RunFinishedInterruptOutcome", "ResumeEntry", "SubagentStartedEvent", "SubagentFinishedEvent",
          "SubagentErrorEvent", "PROTOCOL_VERSION")
INSTALL = ("install the assistant again with its extra [ag-ui], as in the README's Install step (from a checkout: "
           "pip install '/path/to/this/checkout[ag-ui]'), which brings the package ag-ui-protocol, 1.0 or newer")


def protocol_problem() -> str | None:
    """Why the installed `ag-ui-protocol` cannot serve the endpoint, or None when it can."""
    try:
        import ag_ui.core as core
        import ag_ui.encoder  # noqa: F401
    except ImportError:
        return "assistant.agui serves AG-UI with the package ag-ui-protocol, which is not installed."
    missing = [name for name in NEEDED if not hasattr(core, name)]
    if missing:
        return (f"The installed ag-ui-protocol lacks {', '.join(missing)}: the AG-UI endpoint needs version 1.0 "
                "or newer (interrupts, resume and subagent events).")
    return None


@register()
def check_agui(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    problem = protocol_problem()
    if problem is None:
        return []
    return [Error(problem, hint=f"Install it: {INSTALL}; or remove 'assistant.agui' from INSTALLED_APPS.",
                  id="assistant.E050")]


@register(Tags.urls)
def check_agui_urls(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The host includes this app's URL beside the assistant's own (assistant/urls.py, `assistant_urls`)."""
    return sub_app_unrouted(
        "assistant:ag-ui", "assistant.agui.urls", check_id="assistant.W051",
        message="assistant.agui is installed, but its URL is not routed: the AG-UI endpoint (assistant:ag-ui) "
                "answers 404.")
