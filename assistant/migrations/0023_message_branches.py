"""A chat's messages become a tree: each follows its parent, and a chat may be read along another branch.

A chat written before this had one line of messages: each message's parent is the one before it, in the order
they were written (summaries aside)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('assistant', '0022_approved_with_changes'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentchat',
            name='leaf',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='assistant.agentmessage'),
        ),
        migrations.AddField(
            model_name='agentmessage',
            name='parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='children', to='assistant.agentmessage'),
        ),
        migrations.AddField(
            model_name='agentrun',
            name='answers_again',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='answered_again_by', to='assistant.agentmessage'),
        ),
        migrations.RunSQL(
            """
            UPDATE assistant_agentmessage AS message SET parent_id = earlier.previous_id
            FROM (SELECT id, lag(id) OVER (PARTITION BY chat_id ORDER BY id) AS previous_id
                  FROM assistant_agentmessage WHERE role <> 'summary') AS earlier
            WHERE message.id = earlier.id AND earlier.previous_id IS NOT NULL
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
