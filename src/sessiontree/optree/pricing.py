"""Token usage to cost, offline: a shipped price table, your own table, or genai-prices.

The token convention, stated once: prices apply to *exclusive* buckets. ``Usage.input`` is
the uncached input and is billed at the input price; cache reads and cache writes are billed
at their own prices; output (reasoning included) at the output price::

    cost = (input * p_in + cache_read * p_read + cache_write * p_write + output * p_out) / 1e6

Worked example (tested): Anthropic reports ``input_tokens=1000``, ``cache_read_input_tokens=300``,
``cache_creation_input_tokens=50``, ``output_tokens=200`` for ``claude-sonnet-4`` ($3 input,
$0.30 cache read, $3.75 cache write, $15 output per million). Anthropic's input *excludes* the
cache, so the buckets are 1000 / 300 / 50 / 200 and the inclusive input is 1,350::

    (1000 * 3 + 300 * 0.30 + 50 * 3.75 + 200 * 15) / 1e6 = $0.0062775

Reading Anthropic's 1,000 as an inclusive count (the OpenAI convention) would bill only 650
uncached tokens: $0.0052275, $0.00105 short. OpenAI's ``prompt_tokens=1350`` with
``cached_tokens=300`` is inclusive and normalises to 1,050 uncached. :class:`~.model.Usage`
constructors do this normalisation when the usage is recorded.

Invariants:
* Arithmetic is ``Decimal`` throughout; nothing is rounded.
* A provider-reported cost always wins over a computed one (``cost_source="provider"``).
* A cost computed here records the table's name and version (``price_table``).
* Nothing here touches the network: the shipped table is a JSON file in the package, and the
  genai-prices adapter uses the snapshot bundled with that package.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import MissingExtra
from .errors import InvalidOpTree
from .model import Accounting, Usage, decimal_of

__all__ = [
    "NO_PRICES",
    "GenaiPricesTable",
    "JsonPriceTable",
    "PriceTable",
    "PriceTier",
    "Prices",
    "builtin_prices",
    "cost_of",
    "price_accounting",
]

_MILLION = Decimal(1_000_000)


class PriceTier(msgspec.Struct, frozen=True, kw_only=True):
    """Prices that replace the base prices for a whole request whose inclusive input exceeds
    ``above_input_tokens`` (the providers' "cliff" tiers); ``None`` keeps the base price."""

    above_input_tokens: int
    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None


class Prices(msgspec.Struct, frozen=True, kw_only=True):
    """US dollars per million tokens of one model.

    Attributes:
        input: uncached input.
        output: output, reasoning included.
        cache_read: cached input read; ``None`` bills those tokens at ``input``.
        cache_write: input written to the cache; ``None`` bills those tokens at ``input``.
        tiers: input-size tiers, ascending.
    """

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    tiers: tuple[PriceTier, ...] = ()


def cost_of(usage: Usage, prices: Prices) -> Decimal:
    """The exact cost of ``usage`` at ``prices`` (see the module docstring for the formula)."""
    p_in, p_out, p_read, p_write = prices.input, prices.output, prices.cache_read, prices.cache_write
    for tier in reversed(prices.tiers):
        if usage.input_total > tier.above_input_tokens:
            p_in = tier.input if tier.input is not None else p_in
            p_out = tier.output if tier.output is not None else p_out
            p_read = tier.cache_read if tier.cache_read is not None else p_read
            p_write = tier.cache_write if tier.cache_write is not None else p_write
            break
    total = (usage.input * p_in
             + usage.cache_read * (p_read if p_read is not None else p_in)
             + usage.cache_write * (p_write if p_write is not None else p_in)
             + usage.output * p_out)
    return total / _MILLION


@runtime_checkable
class PriceTable(Protocol):
    """Anything that prices a usage offline.

    ``name`` identifies the table and its version (it is recorded with every computed cost);
    ``cost`` returns ``None`` when the model is not in the table.
    """

    @property
    def name(self) -> str: ...

    def cost(self, usage: Usage, provider: str | None, model: str) -> Decimal | None: ...


class _NoPrices:
    name = "none"

    def cost(self, usage: Usage, provider: str | None, model: str) -> Decimal | None:
        return None


NO_PRICES: PriceTable = _NoPrices()
"""A table that prices nothing: costs stay as the provider reported them."""

_PROVIDER_ALIASES = {
    "gemini": "google", "google-gla": "google", "google-vertex": "google", "vertex": "google",
    "vertexai": "google", "google-genai": "google", "azure-openai": "openai",
    "azure": "openai", "anthropic-vertex": "anthropic", "bedrock-anthropic": "anthropic",
}
_RELEASE_SUFFIX = re.compile(
    r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|-\d{3}|-latest)*(?:-v\d+(?::\d+)?)?(?:@\d{8})?\Z")
_BEDROCK_PREFIX = re.compile(r"\A(?:[a-z]{2}\.)?anthropic\.")


def _normalize_model(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]
    return _BEDROCK_PREFIX.sub("", name)


class JsonPriceTable:
    """A price table in ai-agent's pricing shape, loaded from JSON or a mapping.

    The document is ``{"name", "version", "unit": "per_1m" | "per_1k", "pricing":
    {provider: {model: {"prompt", "completion", "cacheRead"?, "cacheWrite"?, "aliases"?,
    "tiers"?: [{"aboveInputTokens", "prompt"?, ...}]}}}}``; prices may be numbers or decimal
    strings. Model ids match a key or alias exactly, or followed only by a release suffix
    (``-20250514``, ``-2024-08-06``, ``-001``, ``-latest``, ``-v2:0``, ``@20250514``); the
    router's ``actual_model`` is priced when known.

    Args:
        document: the parsed JSON document.
        name: overrides ``document["name"]``.

    Raises:
        InvalidOpTree: a price is missing or not a finite non-negative number.
    """

    def __init__(self, document: Mapping[str, Any], *, name: str | None = None) -> None:
        unit = document.get("unit", "per_1m")
        if unit not in ("per_1m", "per_1k"):
            raise InvalidOpTree(f"price unit must be per_1m or per_1k, got {unit!r}")
        scale = Decimal(1000) if unit == "per_1k" else Decimal(1)
        base = name or str(document.get("name", "custom"))
        version = document.get("version")
        self._name = f"{base}@{version}" if version else base
        self.source: str | None = document.get("source")
        self._models: dict[str, dict[str, Prices]] = {}
        for provider, models in (document.get("pricing") or {}).items():
            table: dict[str, Prices] = {}
            for model, spec in models.items():
                prices = self._prices(spec, scale, f"{provider}/{model}")
                for key in (model, *spec.get("aliases", ())):
                    table[_normalize_model(key)] = prices
            self._models[provider.lower()] = table

    @staticmethod
    def _price(spec: Mapping[str, Any], key: str, scale: Decimal, where: str,
               required: bool) -> Decimal | None:
        value = spec.get(key)
        if value is None:
            if required:
                raise InvalidOpTree(f"price table entry {where} has no {key!r} price")
            return None
        price = decimal_of(value)
        assert price is not None
        if price < 0:
            raise InvalidOpTree(f"price table entry {where}: {key} is negative")
        return price * scale

    @classmethod
    def _prices(cls, spec: Mapping[str, Any], scale: Decimal, where: str) -> Prices:
        tiers = tuple(
            PriceTier(above_input_tokens=int(t["aboveInputTokens"]),
                      input=cls._price(t, "prompt", scale, where, False),
                      output=cls._price(t, "completion", scale, where, False),
                      cache_read=cls._price(t, "cacheRead", scale, where, False),
                      cache_write=cls._price(t, "cacheWrite", scale, where, False))
            for t in sorted(spec.get("tiers", ()), key=lambda t: int(t["aboveInputTokens"])))
        prompt = cls._price(spec, "prompt", scale, where, True)
        completion = cls._price(spec, "completion", scale, where, True)
        assert prompt is not None and completion is not None
        return Prices(input=prompt, output=completion,
                      cache_read=cls._price(spec, "cacheRead", scale, where, False),
                      cache_write=cls._price(spec, "cacheWrite", scale, where, False),
                      tiers=tiers)

    @classmethod
    def from_file(cls, path: str | Path, *, name: str | None = None) -> JsonPriceTable:
        """Load a table from a JSON file."""
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh), name=name)

    @property
    def name(self) -> str:
        """``<name>@<version>`` of the table."""
        return self._name

    def providers(self) -> list[str]:
        """The providers the table prices."""
        return list(self._models)

    def lookup(self, provider: str | None, model: str) -> Prices | None:
        """The prices of a model, or ``None`` when the table does not have it.

        Args:
            provider: the provider id (``anthropic``, ``openai``, ``google``...); ``None``
                searches every provider.
            model: the model id as the provider or router reported it.
        """
        wanted = _normalize_model(model)
        if provider is not None:
            key = provider.strip().lower()
            key = _PROVIDER_ALIASES.get(key, key)
            tables = [self._models[key]] if key in self._models else []
        else:
            tables = list(self._models.values())
        for table in tables:
            if wanted in table:
                return table[wanted]
        best: tuple[int, Prices] | None = None
        for table in tables:
            for key, prices in table.items():
                if (wanted.startswith(key) and _RELEASE_SUFFIX.match(wanted, len(key))
                        and (best is None or len(key) > best[0])):
                    best = (len(key), prices)
        return best[1] if best else None

    def cost(self, usage: Usage, provider: str | None, model: str) -> Decimal | None:
        """The cost of ``usage`` for this model, or ``None`` when the model is not priced."""
        prices = self.lookup(provider, model)
        return cost_of(usage, prices) if prices is not None else None


@functools.cache
def builtin_prices() -> JsonPriceTable:
    """The price table shipped with sessiontree (``optree/data/prices.json``; its ``source``
    names where the prices come from and when they were read)."""
    text = resources.files("sessiontree.optree").joinpath("data/prices.json").read_text("utf-8")
    return JsonPriceTable(json.loads(text))


class GenaiPricesTable:
    """Prices from the genai-prices package (its bundled snapshot: no network).

    Needs the ``prices`` extra (Python 3.11+): ``pip install 'sessiontree[prices]'``.

    Raises:
        MissingExtra: genai-prices is not installed.
    """

    def __init__(self) -> None:
        try:
            import genai_prices
        except ImportError:
            raise MissingExtra("GenaiPricesTable requires the 'prices' extra: "
                               "pip install 'sessiontree[prices]'") from None
        self._module = genai_prices
        self._name = f"genai-prices@{genai_prices.__version__}"

    @property
    def name(self) -> str:
        """``genai-prices@<version>``."""
        return self._name

    def cost(self, usage: Usage, provider: str | None, model: str) -> Decimal | None:
        """genai-prices' ``calc_price`` of ``usage`` (passed with an inclusive input count)."""
        gp_usage = self._module.Usage(
            input_tokens=usage.input_total, cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write, output_tokens=usage.output)
        try:
            result = self._module.calc_price(gp_usage, model, provider_id=provider)
        except LookupError:
            return None
        total = result.total_price
        return total if isinstance(total, Decimal) else Decimal(str(total))


def price_accounting(entry: Accounting, table: PriceTable) -> Accounting:
    """``entry`` with its cost computed from ``table`` when it has usage and no cost.

    A provider-reported cost is kept as is; a model the table does not know leaves the
    entry unpriced (``cost_source="none"``, counted in ``Totals.unpriced_calls``).
    """
    if entry.cost_usd is not None or entry.usage is None:
        return entry
    model = entry.actual_model or entry.model
    if not model:
        return entry
    provider = entry.actual_provider if entry.actual_model else entry.provider
    cost = table.cost(entry.usage, provider, model)
    if cost is None:
        return entry
    return msgspec.structs.replace(entry, cost_usd=cost, cost_source="computed",
                                   price_table=table.name)
