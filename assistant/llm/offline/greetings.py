"""A greeting or a thank-you on its own ("hi", "good morning", "thanks!"): answered briefly by whoever is asked,
with what to do next, and never read as a request for the app (no tool fits it, and none should be tried).

Only a message that is nothing but a greeting counts: "hi, list my tasks" is a request that starts politely.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A hello, as it may also start a question about the assistant ("hey there, what can you do?").
HELLO = r"(?:hi|hello|hey|hiya|howdy|greetings|good\s+(?:morning|afternoon|evening|day))(?:\s+there)?"
_THANKS = (r"(?:(?:ok(?:ay)?|great|perfect|cool|lovely|brilliant)[\s,!.]+)?"
           r"(?:thanks|thank\s+you|thx|cheers|many\s+thanks)(?:\s+(?:a\s+lot|so\s+much|very\s+much|again))?")
_GREETING = re.compile(
    rf"^\s*(?:(?P<hello>{HELLO})|(?P<thanks>{_THANKS}))(?:[\s,]+(?:assistant|everyone|all))?[\s!.:)]*$",
    re.IGNORECASE,
)
_WHAT_NEXT = "ask “what can you do?” to see"


def is_greeting(text: str) -> bool:
    return bool(_GREETING.match(text))


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"


def greeting_reply(text: str, *, members: Sequence[str] = (), has_tools: bool = False) -> str:
    """A short friendly answer to `text` (a greeting, see `is_greeting`). `members`: the members a spec that
    only hands work on may ask; `has_tools`: whether it has tools of its own."""
    found = _GREETING.match(text)
    if found is not None and found.group("thanks"):
        opening = "You're welcome!"
    elif found is not None and found.group("hello").lower().startswith("good"):
        opening = " ".join(found.group("hello").split()).capitalize() + "!"
    else:
        opening = "Hello!"
    if members:
        return (f"{opening} Tell me what you need and I'll hand it to the member whose role fits it "
                f"({_either(members)}), or {_WHAT_NEXT} what each of them does.")
    if has_tools:
        return f"{opening} Tell me what to do in this app, with names in quotes, or {_WHAT_NEXT} what I can do for you."
    return f"{opening} I'm the offline demo model and no tools are offered to you here, so I can only chat."
