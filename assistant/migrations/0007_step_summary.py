from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("assistant", "0006_run_feedback")]

    operations = [
        migrations.AddField(
            model_name="agentstep",
            name="summary",
            field=models.TextField(
                blank=True,
                help_text="For a tool call that asks the person first: what it will do, in words, naming objects "
                "as they see them (set when the step starts waiting).",
            ),
        ),
    ]
