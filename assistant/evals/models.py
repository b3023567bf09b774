"""An eval set and its cases. A case is a snapshot: it keeps what it needs of its run (the question, the
conversation before it, the spec, the person, the recorded steps and the reply) so that it replays the same
after the run is pruned, its chat deleted or the set imported on another site; `source_run` links back while
the run is there."""

from __future__ import annotations

from django.conf import settings
from django.db import models

NAME_MAX = 100


class EvalSet(models.Model):
    name = models.SlugField(max_length=NAME_MAX, unique=True, help_text="Letters, digits, '-' and '_': the name "
                            "a command line and a repository's file use.")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "eval set"

    def __str__(self) -> str:
        return self.name


class EvalCase(models.Model):
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="cases")
    # The recorded run it was made from, while it exists (a pruned run leaves the case whole).
    source_run = models.ForeignKey("assistant.AgentRun", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    # Its run's number on the site it was recorded on: how an imported case says where it came from.
    source_run_number = models.BigIntegerField(null=True, blank=True)
    # The person it ran as: a replay is offered the tools they are offered (answered from the recording).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    owner_username = models.CharField(max_length=150, blank=True)
    spec = models.CharField(max_length=100)
    question = models.TextField()
    # The chat before the question, oldest first: [{"role": "user"|"assistant", "content": "..."}].
    conversation = models.JSONField(default=list, blank=True)
    # What the run did (see assistant/evals/cases.py, `recording_of`): its steps, reply, model and figures.
    recording = models.JSONField(default=dict)
    # What a replay is expected to do (see `default_expectations`); staff refine it where editing is allowed.
    expectations = models.JSONField(default=dict, blank=True)
    # Why it was added: "thumbs_down", "failed" (proposed), or "" (chosen by staff).
    reason = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["eval_set", "id"]
        verbose_name = "eval case"
        constraints = [
            models.UniqueConstraint(fields=["eval_set", "source_run_number"], name="evalcase_one_per_run",
                                    condition=models.Q(source_run_number__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.eval_set.name} #{self.pk}: {self.question[:60]}"


class EvalRun(models.Model):
    """One replay of a set against one or more candidates (a model, instructions, a spec), on the workers."""

    class Status(models.TextChoices):
        RUNNING = "running"
        FINISHED = "finished"

    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="eval_runs")
    # [{"label": "...", "model": "..."|None, "instructions": "..."|None, "spec": "..."|None}]: None keeps the
    # case's own (its spec) or the spec's current settings (model, instructions).
    candidates = models.JSONField(default=list)
    # What each case is compared with: "recorded" (the recording, graded the same way) or an earlier eval
    # run's number.
    baseline = models.CharField(max_length=40, default="recorded")
    # Each case's baseline pass and score, by case id ({"12": [true, 1.0]}): worked out once (a judge of the
    # recording is a model call) and kept, however often the report is shown.
    baseline_grades = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "eval run"

    def __str__(self) -> str:
        return f"Eval run {self.pk} of {self.eval_set.name}"


class EvalResult(models.Model):
    """One case replayed against one candidate, and its grades once its replay ended."""

    class Status(models.TextChoices):
        PENDING = "pending"  # its replay is queued or working
        GRADED = "graded"
        ERROR = "error"  # its replay could not be made (the case's person is not on this site, say)

    eval_run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="results")
    candidate = models.CharField(max_length=100)
    # The replay: a run of channel `eval`, its tool calls answered from the case's recording.
    replay_run = models.OneToOneField("assistant.AgentRun", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="eval_result")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    passed = models.BooleanField(null=True)
    score = models.FloatField(null=True)
    # [{"grader", "passed", "score", "detail"}], in the graders' order.
    grades = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    total_tokens = models.PositiveIntegerField(null=True)
    duration_ms = models.PositiveIntegerField(null=True)
    graded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["eval_run", "case_id", "candidate"]
        constraints = [models.UniqueConstraint(fields=["eval_run", "case", "candidate"], name="evalresult_once")]

    def __str__(self) -> str:
        return f"Case {self.case_id} × {self.candidate}: {self.status}"
