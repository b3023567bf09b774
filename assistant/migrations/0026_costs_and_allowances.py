"""What model calls and runs cost (assistant/llm/prices.py), the prompt tokens read from a cache, and the allowances
staff give people and groups (assistant/runs/allowances.py)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('assistant', '0025_reply_links_and_cards'),
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='agentrun',
            name='cost',
            field=models.DecimalField(blank=True, decimal_places=6, max_digits=14, null=True),
        ),
        migrations.AddField(
            model_name='agentstep',
            name='cached_tokens',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='agentstep',
            name='cost',
            field=models.DecimalField(blank=True, decimal_places=6, max_digits=14, null=True),
        ),
        migrations.CreateModel(
            name='AgentAllowance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tokens_per_day', models.PositiveBigIntegerField(blank=True, help_text='Tokens a day, counted from midnight; empty: no limit.', null=True)),
                ('tokens_per_month', models.PositiveBigIntegerField(blank=True, help_text='Tokens a month, from the 1st; empty: no limit.', null=True)),
                ('cost_per_day', models.DecimalField(blank=True, decimal_places=2, help_text='Money a day, by the PRICES setting; empty: no limit.', max_digits=12, null=True)),
                ('cost_per_month', models.DecimalField(blank=True, decimal_places=2, help_text='Money a month, by the PRICES setting; empty: no limit.', max_digits=12, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('group', models.OneToOneField(blank=True, help_text="…the group each of whose members it is for (a person's own allowance wins over their groups').", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agent_allowance', to='auth.group')),
                ('user', models.OneToOneField(blank=True, help_text='The person it is for, or…', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agent_allowance', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['group__name', 'user__username'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('group__isnull', True), ('user__isnull', False)), models.Q(('group__isnull', False), ('user__isnull', True)), _connector='OR'), name='allowance_for_one_holder')],
            },
        ),
    ]
