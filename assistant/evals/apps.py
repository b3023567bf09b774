from __future__ import annotations

from django.apps import AppConfig

from assistant.channel_policies import register_channel
from assistant.evals.conf import DEFAULTS


class AssistantEvalsConfig(AppConfig):
    """Eval sets made from recorded runs; the core assistant works without this app."""

    name = "assistant.evals"
    label = "assistant_evals"
    verbose_name = "Assistant evals"
    default_auto_field = "django.db.models.BigAutoField"
    # This app's keys of the ASSISTANT dict (conf.py): known to the core's check of it wherever it is installed.
    assistant_setting_defaults = DEFAULTS

    def ready(self) -> None:
        # Imported once the app registry is ready: each of these imports the models, which Django refuses to load
        # while it is still importing the apps' configs.
        from assistant.evals import quality, replays  # noqa: F401  (grades a replay when it ends; judges its recording)
        from assistant.evals.channel import EVAL

        # A replay is a run of its own channel, which the core knows only by this policy.
        register_channel(EVAL)
