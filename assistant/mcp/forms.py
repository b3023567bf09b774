from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms

from assistant.mcp.conf import mcp_settings
from assistant.mcp.models import NAME_MAX
from assistant.mcp.tokens import spec_choices

#: The expiries the page offers (the command takes any duration up to ten years).
EXPIRIES = {"": None, "7d": timedelta(days=7), "30d": timedelta(days=30), "90d": timedelta(days=90),
            "365d": timedelta(days=365)}
EXPIRY_LABELS = {"": "Never", "7d": "In 7 days", "30d": "In 30 days", "90d": "In 90 days", "365d": "In a year"}


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, help_text="Which agent it is for, such as “Claude on my laptop”.")
    spec = forms.ChoiceField(label="Assistant spec", help_text="Whose tools and profile the token acts with.")
    read_only = forms.BooleanField(required=False, label="Read-only",
                                   help_text="Read tools only, whatever the spec may do.")
    containment = forms.BooleanField(
        required=False, label="Ask me before it writes after reading others' text",
        help_text="Once a call has returned text someone else wrote (a comment, a shared project), each change "
                  "it asks for soon after waits for your approval.")
    expires = forms.ChoiceField(required=False, label="Expires", choices=list(EXPIRY_LABELS.items()))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "assistant-token-%s")  # ids of their own inside a host's layout
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        spec = self.fields["spec"]
        assert isinstance(spec, forms.ChoiceField)  # noqa: S101  (for the type checker)
        spec.choices = [(name, name) for name in spec_choices()]
        minutes = max(1, round(float(mcp_settings.MCP_CONTAINMENT_SECONDS) / 60))
        self.fields["containment"].help_text = (
            "Once a call has returned text someone else wrote (a comment, a shared project), each change it asks "
            f"for in the next {minutes} minute{'' if minutes == 1 else 's'} waits for your approval.")

    def expires_in(self) -> timedelta | None:
        return EXPIRIES[self.cleaned_data.get("expires") or ""]
