"""Text a person types that others read as it was typed: a chat's title in the staff's lists, a feedback
comment, a host's names of things (the tracker's projects and tasks use it too).

`readable_text` keeps what a person can see and drops what only hides or rearranges it:

- control characters (C0, DEL, C1: NUL among them) and format characters — zero-width spaces, the byte
  order mark, soft hyphens, invisible tag characters (which can smuggle text to a model), and every
  bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), with which a title can
  show in an order other than the one it was stored in. A zero-width joiner or non-joiner stays where it
  joins two characters (emoji sequences, Persian and Indic spelling need them); at an end or beside a
  space it goes;
- unpaired surrogates, which are not text;
- every other space or line break becomes one space, runs of them one, and the ends are trimmed; in
  `multiline` text (a comment), line breaks stay as "\\n" and tabs as they are, and each line's trailing
  spaces go;
- then Unicode's canonical composition (NFC).

NFC rather than NFKC: NFC changes nothing a reader sees (a letter typed as a base and an accent, or as
one character, becomes the one character, so the two are equal), while NFKC changes what was typed —
"x²" becomes "x2", "½" "1⁄2", "ﬁ" "fi", full-width forms half-width — and it does not stop look-alikes
anyway (a Cyrillic "а" stays what it is). What hides or reorders text is removed above, not folded.

A text with nothing visible left — only spaces, marks that combine with nothing, or letters that show as
blank (the Hangul fillers, the braille blank) — is "", so that its caller refuses it as it refuses an
empty one.
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = ["parsed_json_problem", "readable_text"]

_JOINERS = frozenset("\u200c\u200d")
# Letters and symbols that render as nothing; a text of only these shows blank.
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_LINE_BREAKS = frozenset("\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")


_HIDDEN = frozenset({"Cc", "Cf", "Cs"})  # controls, format characters, unpaired surrogates
_NO_INK = _HIDDEN | {"Mn", "Me", "Mc", "Zs", "Zl", "Zp"}  # ... and marks, which show only on a base


def _shows(char: str) -> bool:
    """Whether `char` puts ink on the page by itself. (A private-use or unassigned character may: a newer
    Unicode than this Python's has more emoji.)"""
    return not char.isspace() and char not in _BLANK and unicodedata.category(char) not in _NO_INK


def _joinable(char: str) -> bool:
    """Whether a joiner beside `char` joins something: a visible character or a mark (an emoji's variation
    selector, an Indic virama)."""
    return bool(char) and not char.isspace() and unicodedata.category(char) not in _HIDDEN


def readable_text(text: str, *, multiline: bool = False, max_chars: int | None = None) -> str:
    """`text` as others should read it (see the module's docstring); cut to `max_chars` characters when
    given, and tidied again after the cut (no joiner or space left dangling at the end)."""
    if multiline:
        text = text.replace("\r\n", "\n")
    kept: list[str] = []
    for index, char in enumerate(text):
        if multiline and char in _LINE_BREAKS:
            kept.append("\n")
        elif multiline and char == "\t":
            kept.append(char)
        elif char.isspace():
            kept.append(" ")
        elif char in _JOINERS:
            if _joinable(text[index - 1:index]) and _joinable(text[index + 1:index + 2]):
                kept.append(char)
        elif unicodedata.category(char) not in _HIDDEN:
            kept.append(char)
    cleaned = unicodedata.normalize("NFC", "".join(kept))
    if multiline:
        cleaned = "\n".join(line.rstrip() for line in cleaned.split("\n")).strip()
    else:
        cleaned = " ".join(cleaned.split())
    if max_chars is not None and len(cleaned) > max_chars:
        cleaned = cleaned[:max_chars].rstrip().rstrip("\u200c\u200d").rstrip()
    return cleaned if any(_shows(char) for char in cleaned) else ""


def parsed_json_problem(value: Any, *, max_depth: int, what: str) -> str | None:
    """Why parsed JSON a client sent cannot be taken further, or None: nested deeper than `max_depth`, or a
    string with a lone surrogate (JSON's \\ud800 escapes parse to one, and nothing downstream can encode it).
    `what` starts the sentence ("Frames", "The input"). Walks without recursion, so no depth can crash it."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{what} must be Unicode text: a lone surrogate (such as \\ud800) is not."
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return f"{what} may nest at most {max_depth} levels deep."
            stack.extend((child, depth + 1) for child in ([*item.keys(), *item.values()] if isinstance(item, dict)
                                                          else item))
    return None
