"""A reply keeps the pages of the site it may link to (assistant/live/links.py); a step keeps its tool's card
(assistant/live/cards.py)."""


from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('assistant', '0024_attachments'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentmessage',
            name='links',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='agentstep',
            name='card',
            field=models.TextField(blank=True, help_text="For a tool call whose tool declares a card: the object it acted on or showed, drawn by the app's own template as the person could see it then, sanitised (assistant/tools/cards.py)."),
        ),
    ]
