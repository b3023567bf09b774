from __future__ import annotations

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured

from assistant.channel_policies import register_channel
from assistant.mcp.conf import DEFAULTS
from assistant.panel_links import PanelLink, register_panel_link

#: The panel's link to the person's access tokens, shown where the host routes this app's URLs.
TOKENS_LINK = PanelLink(label="Tokens", url_name="assistant:tokens", data_attribute="data-assistant-tokens")


class AssistantMcpConfig(AppConfig):
    """The person's own agent over MCP, with access tokens; the core assistant works without this app."""

    name = "assistant.mcp"
    label = "assistant_mcp"
    verbose_name = "Assistant access tokens"
    default_auto_field = "django.db.models.BigAutoField"
    # This app's keys of the ASSISTANT dict (conf.py): known to the core's check of it wherever it is installed.
    assistant_setting_defaults = DEFAULTS

    def ready(self) -> None:
        try:
            import django_mcpz  # noqa: F401  (the endpoint's MCP server)
        except ImportError as missing:
            raise ImproperlyConfigured(
                "assistant.mcp serves MCP with django-mcpz, which is not installed: "
                "install the assistant again with its extra [mcp], as in the README's Install step "
                "(from a checkout: pip install '/path/to/this/checkout[mcp]')."
            ) from missing
        # Imported once the app registry is ready (and django-mcpz is known to be there): each of these imports
        # the models, which Django refuses to load while it is still importing the apps' configs.
        from assistant.access.authority import TOKEN_AUTHENTICATORS, TOKEN_CHECKS
        from assistant.mcp import checks  # noqa: F401  (registers the MCP checks)
        from assistant.mcp.channel import MCP
        from assistant.mcp.server import token_caller
        from assistant.mcp.tokens import token_still_acts

        # Each call of the person's agent is a run of its own channel, which the core knows only by this policy.
        register_channel(MCP)
        # The panel's toolbar links the person's tokens page; the core's templates name none of this app's URLs.
        register_panel_link(TOKENS_LINK)

        # A run a worker works on for a token (an AG-UI frontend's) stops once the token no longer acts.
        if token_still_acts not in TOKEN_CHECKS:
            TOKEN_CHECKS.append(token_still_acts)
        # An endpoint of another app that takes the person's access tokens (AG-UI's) checks them as MCP does.
        if token_caller not in TOKEN_AUTHENTICATORS:
            TOKEN_AUTHENTICATORS.append(token_caller)
