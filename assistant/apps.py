from __future__ import annotations

from django.apps import AppConfig


class AssistantConfig(AppConfig):
    name = "assistant"
    verbose_name = "Assistant"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from assistant import checks  # noqa: F401  (registers the system checks)
        from assistant.society import checks as society_checks  # noqa: F401  (registers the members' checks)
        from assistant.tasks import worker_queue_connect_celery
        from assistant.tools import autodiscover
        from assistant.tools import checks as tool_checks  # noqa: F401  (registers the tool checks)

        autodiscover()
        # The domain hands work to workers through a port (assistant/infra/worker_queue.py); here it is Celery's.
        worker_queue_connect_celery()

        from django.contrib.auth.signals import user_logged_out

        from assistant.conversation.services import on_user_logged_out

        # Logging out ends what that session's runs were doing and closes its sockets at once.
        user_logged_out.connect(on_user_logged_out, dispatch_uid="assistant.session_ended_on_logout")
