"""A run's session key is no longer stored in clear: a keyed digest to look runs up by, and the key sealed for
the worker (assistant/access/session_keys.py). The runs that may still act (queued, running, waiting for their
person) are converted, so they go on acting with their session; an ended run needs no session, and its key
goes with the clear column."""

from django.db import migrations, models

ACTIVE = ["queued", "running", "awaiting_confirmation"]


def seal_active_runs(apps, schema_editor):
    # The same functions the running code opens them with: a value written here must be one it reads.
    from assistant.access.session_keys import session_key_digest, session_key_seal

    AgentRun = apps.get_model("assistant", "AgentRun")
    runs = AgentRun.objects.filter(status__in=ACTIVE).exclude(session_key="").only("pk", "session_key")
    for run in runs.iterator(chunk_size=500):
        AgentRun.objects.filter(pk=run.pk).update(
            session_digest=session_key_digest(run.session_key), session_sealed=session_key_seal(run.session_key))


def unseal_active_runs(apps, schema_editor):
    from assistant.access.session_keys import SessionKeyUnreadable, session_key_open

    AgentRun = apps.get_model("assistant", "AgentRun")
    for run in AgentRun.objects.exclude(session_digest="").only("pk", "session_sealed").iterator(chunk_size=500):
        try:
            key = session_key_open(run.session_sealed)
        except SessionKeyUnreadable:
            continue  # sealed under a secret the site no longer has: that session has ended anyway
        AgentRun.objects.filter(pk=run.pk).update(session_key=key)


class Migration(migrations.Migration):

    dependencies = [
        ('assistant', '0010_memory_recall_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentrun',
            name='session_digest',
            field=models.CharField(blank=True, default='', editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name='agentrun',
            name='session_sealed',
            field=models.BinaryField(blank=True, default=b'', editable=False),
        ),
        migrations.RunPython(seal_active_runs, unseal_active_runs, elidable=False),
        migrations.RemoveIndex(
            model_name='agentrun',
            name='run_active_session',
        ),
        migrations.RemoveField(
            model_name='agentrun',
            name='session_key',
        ),
        migrations.AddIndex(
            model_name='agentrun',
            index=models.Index(condition=models.Q(('status__in', ['queued', 'running', 'awaiting_confirmation'])), fields=['session_digest'], name='run_active_session_digest'),
        ),
    ]
