"""The frames a client sends on the live socket, read as the protocol allows (see docs/protocol.md): a JSON object
with a string `type`, ids that name database rows, page sizes and flags, or BadRequest with the reason."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from assistant.conf import assistant_settings
from assistant.infra.text import parsed_json_problem

# Ids are the database's bigint keys.
MAX_ID = 2**63 - 1
# ASCII digits only: "²" passes str.isdigit() but int() refuses it, and "٣" would name row 3.
_ID_TEXT = re.compile(r"[0-9]{1,19}")
# Nothing a client sends needs more; deeper frames are refused before anything walks them recursively.
MAX_FRAME_DEPTH = 32


class BadRequest(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def frame_id(content: dict[str, Any], key: str, *, required: bool) -> int | None:
    value = content.get(key)
    if value is None and not required:
        return None
    if isinstance(value, str) and _ID_TEXT.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        raise BadRequest("bad_request", f'"{key}" must be a positive integer id.')
    return value


def frame_limit(content: dict[str, Any], *, default: int, maximum: int) -> int:
    value = content.get("limit")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise BadRequest("bad_request", f'"limit" must be an integer from 1 to {maximum}.')
    return value


def frame_flag(content: dict[str, Any], key: str) -> bool:
    value = content.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest("bad_request", f'"{key}" must be true or false.')
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def frame_parse(text: str) -> dict[str, Any]:
    """The frame as a JSON object with a string `type`, or BadRequest with the reason it is not.

    Refuses what cannot travel on: numbers JSON cannot hold (NaN, Infinity, 1e400, integers past
    Python's 4,300-digit limit), lone surrogates (not Unicode text: neither PostgreSQL nor the channel
    layer can carry them) and nesting deeper than MAX_FRAME_DEPTH.
    """
    # Counted as the wire would: surrogatepass so that a lone surrogate is counted, not a crash.
    limit = assistant_settings.MAX_FRAME_BYTES
    if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
        raise BadRequest("frame_too_large", f"Frames are limited to {limit} bytes.")
    try:
        content = json.loads(text, parse_float=_finite, parse_constant=_no_constants)
    except RecursionError:
        raise BadRequest("bad_frame", f"Frames may nest at most {MAX_FRAME_DEPTH} levels deep.") from None
    except json.JSONDecodeError:
        raise BadRequest("bad_frame", "Frames must be JSON objects.") from None
    except ValueError:
        raise BadRequest("bad_frame", "Numbers in frames must be finite and at most 4,300 digits long.") from None
    problem = parsed_json_problem(content, max_depth=MAX_FRAME_DEPTH, what="Frames")
    if problem is not None:
        raise BadRequest("bad_frame", problem)
    if not isinstance(content, dict) or not isinstance(content.get("type"), str):
        raise BadRequest("bad_frame", 'Frames must be JSON objects with a string "type".')
    return content
