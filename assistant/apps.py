from __future__ import annotations

from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete


class AssistantConfig(AppConfig):
    name = "assistant"
    verbose_name = "Assistant"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported once the app registry is ready: each of these imports the models, which Django refuses to load
        # while it is still importing the apps' configs (this module among them).
        from assistant import checks  # noqa: F401  (registers the system checks)
        from assistant.attachments.store import on_attachment_deleted
        from assistant.conversation.services import on_user_logged_out
        from assistant.society import checks as society_checks  # noqa: F401  (registers the members' checks)
        from assistant.tasks import worker_queue_connect_celery
        from assistant.tools import autodiscover
        from assistant.tools import checks as tool_checks  # noqa: F401  (registers the tool checks)
        from assistant.voice import checks as voice_checks  # noqa: F401  (registers the dictation check)

        autodiscover()
        # The domain hands work to workers through a port (assistant/infra/worker_queue.py); here it is Celery's.
        worker_queue_connect_celery()

        # Logging out ends what that session's runs were doing and closes its sockets at once.
        user_logged_out.connect(on_user_logged_out, dispatch_uid="assistant.session_ended_on_logout")
        # A file's content goes with its row, however the row goes (its message pruned, its person deleted).
        post_delete.connect(on_attachment_deleted, sender="assistant.AgentAttachment",
                            dispatch_uid="assistant.attachment_content_deleted")
