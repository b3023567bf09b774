"""What a model call costs: the site's price table (`ASSISTANT["PRICES"]`), per million tokens.

```python
ASSISTANT = {
    "PRICES": {
        "openai:gpt-4.1-mini": {"input": "0.40", "cached_input": "0.10", "output": "1.60"},
        "claude-sonnet-4-5": {"input": "3", "cached_input": "0.30", "output": "15"},
    },
    "CURRENCY": "USD",
}
```

A model is found by its entry in the MODEL chain as written (`openai:gpt-4.1-mini`), else by the model name the
provider answered with (`gpt-4.1-mini-2025-04-14` is not `gpt-4.1-mini`: name it as the provider does). None are
set by default: a model with no price costs nothing that is counted (its tokens still are). Prices are Decimals,
never floats: a sum of thousands of calls is exact to the cent. `cached_input` (the prompt tokens the provider
read from its cache) defaults to `input`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from assistant.conf import assistant_settings

PER = Decimal(1_000_000)
PRICE_KEYS = ("input", "cached_input", "output")
#: Costs are kept to this many decimal places (a millionth of the currency's unit).
COST_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Price:
    """One model's prices per million tokens."""

    input: Decimal
    output: Decimal
    cached_input: Decimal

    @property
    def most_per_token(self) -> Decimal:
        """The most one token of a call may cost (whichever of reading and writing is dearer)."""
        return max(self.input, self.output, self.cached_input) / PER


def _decimal(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{value!r} is not a number")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"{value!r} is not a price (a number of at least 0)")
    return number


def parse_price(entry: Any) -> Price:
    """A PRICES entry as a Price; ValueError saying what is wrong with it."""
    if not isinstance(entry, Mapping):
        raise ValueError("must be a mapping of input, output and (optionally) cached_input prices")
    unknown = set(entry) - set(PRICE_KEYS)
    if unknown:
        raise ValueError(f"has unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         f"(a price has {', '.join(PRICE_KEYS)})")
    missing = [key for key in ("input", "output") if key not in entry]
    if missing:
        raise ValueError(f"has no {' and no '.join(missing)} price")
    prices = {key: _decimal(entry[key]) for key in entry}
    return Price(input=prices["input"], output=prices["output"],
                 cached_input=prices.get("cached_input", prices["input"]))


def price_problems() -> list[str]:
    """What is wrong with the PRICES setting, one sentence an entry (for `manage.py check`)."""
    table = assistant_settings.PRICES
    if not isinstance(table, Mapping):
        return ["PRICES must be a mapping of model names to prices"]
    problems = []
    for name, entry in table.items():
        try:
            parse_price(entry)
        except ValueError as exc:
            problems.append(f"PRICES[{name!r}] {exc}")
    return problems


def price_table() -> dict[str, dict[str, str]]:
    """The PRICES setting's readable entries, as JSON keeps them: what a run takes for its whole life (its
    config's `prices`), so that a price changed while it works does not change what it costs."""
    table = assistant_settings.PRICES
    if not isinstance(table, Mapping):
        return {}
    kept = {}
    for name, entry in table.items():
        try:
            price = parse_price(entry)
        except ValueError:
            continue  # the check says so (assistant.E060)
        kept[str(name)] = {key: str(getattr(price, key)) for key in PRICE_KEYS}
    return kept


def price_of(*names: str, table: Mapping[str, Any] | None = None) -> Price | None:
    """The price of the first of `names` (a chain entry, then the model's own name) in `table` (a run's
    `prices`; without one, the setting's); None."""
    if table is None:
        table = assistant_settings.PRICES
    if not isinstance(table, Mapping):
        return None
    for name in names:
        if name and name in table:
            try:
                return parse_price(table[name])
            except ValueError:
                return None  # the check says so (assistant.E060); an unreadable price counts as none
    return None


def call_cost(price: Price | None, *, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
              ) -> Decimal | None:
    """What a call that read `prompt_tokens` (of them `cached_tokens` from the cache) and wrote
    `completion_tokens` cost; None when its model has no price."""
    if price is None:
        return None
    cached = min(max(cached_tokens, 0), prompt_tokens)
    cost = ((prompt_tokens - cached) * price.input + cached * price.cached_input
            + completion_tokens * price.output) / PER
    return cost.quantize(COST_PLACES)


def most_per_token(chain: str, table: Mapping[str, Any] | None = None) -> Decimal | None:
    """The most one token may cost under a MODEL chain ("a,b"): the dearest of its entries; None when any entry
    has no price (what it spends cannot be bounded in money)."""
    entries = [entry.strip() for entry in str(chain).split(",") if entry.strip()]
    prices = [price_of(entry, table=table) for entry in entries]
    if not prices or any(price is None for price in prices):
        return None
    return max(price.most_per_token for price in prices if price is not None)


def cost_words(cost: Decimal | None, *, none: str = "—") -> str:
    """A cost as staff read it, in the CURRENCY setting: `0.0068 USD` (four places under one, two above); `none`
    when no price was known."""
    if cost is None:
        return none
    places = Decimal("0.01") if abs(cost) >= 1 else Decimal("0.0001")
    return f"{cost.quantize(places):,} {assistant_settings.CURRENCY}"
