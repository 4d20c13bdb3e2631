"""Cost from tokens, offline: the convention on a worked example, the shipped table, tiers,
matching rules, and agreement with genai-prices where it is installed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from sessiontree.errors import MissingExtra
from sessiontree.optree import (
    NO_PRICES,
    Accounting,
    InvalidOpTree,
    JsonPriceTable,
    OpTreeBuilder,
    Prices,
    Usage,
    builtin_prices,
    cost_of,
    price_accounting,
)

SONNET = Prices(input=Decimal(3), output=Decimal(15), cache_read=Decimal("0.3"),
                cache_write=Decimal("3.75"))
ANTHROPIC_USAGE = {"input_tokens": 1000, "cache_read_input_tokens": 300,
                   "cache_creation_input_tokens": 50, "output_tokens": 200}


def test_worked_example_anthropic_convention() -> None:
    usage = Usage.from_anthropic(ANTHROPIC_USAGE)
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (1000, 300, 50, 200)
    assert usage.input_total == 1350
    assert cost_of(usage, SONNET) == Decimal("0.0062775")
    assert builtin_prices().cost(usage, "anthropic", "claude-sonnet-4") == Decimal("0.0062775")


def test_worked_example_wrong_convention_underbills() -> None:
    # Anthropic's 1,000 read as an inclusive count: only 650 uncached tokens are billed.
    wrong = Usage.of(input=1000, cache_read=300, cache_write=50, output=200, convention="openai")
    assert wrong.input == 650
    assert cost_of(wrong, SONNET) == Decimal("0.0052275")
    assert cost_of(Usage.from_anthropic(ANTHROPIC_USAGE), SONNET) - cost_of(wrong, SONNET) == \
        Decimal("0.00105")


def test_openai_inclusive_input_with_cache_reads() -> None:
    usage = Usage.from_openai({"prompt_tokens": 1350, "completion_tokens": 200,
                               "prompt_tokens_details": {"cached_tokens": 300}})
    assert (usage.input, usage.cache_read, usage.input_total) == (1050, 300, 1350)
    # gpt-4o: $2.5 input, $1.25 cached, $10 output per million
    assert builtin_prices().cost(usage, "openai", "gpt-4o") == Decimal("0.005")  # 2625+375+2000


def test_missing_cache_prices_bill_at_the_input_price() -> None:
    prices = Prices(input=Decimal(2), output=Decimal(8))
    assert cost_of(Usage(input=100, cache_read=50, cache_write=25, output=10), prices) == \
        (Decimal(175 * 2 + 10 * 8) / 1_000_000)


def test_tiers_replace_the_base_price_for_the_whole_request() -> None:
    table = builtin_prices()
    small = Usage(input=200_000, output=1000)
    large = Usage(input=200_001, output=1000)
    assert table.cost(small, "google", "gemini-2.5-pro") == Decimal("0.26")
    assert table.cost(large, "google", "gemini-2.5-pro") == Decimal("0.5150025")


@pytest.mark.parametrize(("provider", "model", "expected"), [
    ("anthropic", "claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("anthropic", "claude-sonnet-4-0", "claude-sonnet-4"),
    ("anthropic", "claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("anthropic", "us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
    ("anthropic", "claude-sonnet-4@20250514", "claude-sonnet-4"),
    ("openai", "gpt-4o-2024-08-06", "gpt-4o"),
    ("openai", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
    ("openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("openai", "openai/gpt-4.1", "gpt-4.1"),
    ("gemini", "models/gemini-2.0-flash-001", "gemini-2.0-flash"),
    (None, "o3-mini-2025-01-31", "o3-mini"),
])
def test_model_matching(provider: str | None, model: str, expected: str) -> None:
    table = builtin_prices()
    assert table.lookup(provider, model) == table.lookup(None, expected) is not None


@pytest.mark.parametrize("model", ["gpt-5-pro", "gpt-4o-audio-preview", "claude-sonnet-4-x",
                                   "gemini-2.5-flash-preview-05-20", "gpt-5.2"])
def test_no_guessing_for_other_models(model: str) -> None:
    assert builtin_prices().lookup(None, model) is None


def test_table_records_its_source_and_version() -> None:
    table = builtin_prices()
    assert table.name.startswith("sessiontree-builtin@")
    assert table.source is not None and "genai-prices" in table.source
    assert set(table.providers()) == {"anthropic", "openai", "google"}


def test_custom_table_in_ai_agent_format_per_1k() -> None:
    table = JsonPriceTable({"name": "mine", "version": "1", "unit": "per_1k",
                            "pricing": {"acme": {"m1": {"prompt": 0.001, "completion": 0.002}}}})
    assert table.name == "mine@1"
    assert table.cost(Usage(input=1000, output=1000), "acme", "m1") == Decimal("0.003")
    with pytest.raises(InvalidOpTree):
        JsonPriceTable({"pricing": {"acme": {"m": {"prompt": 1}}}})
    with pytest.raises(InvalidOpTree):
        JsonPriceTable({"unit": "per_token"})


def test_builder_prices_usage_and_records_the_source() -> None:
    b = OpTreeBuilder()
    op = b.begin_op(b.begin_turn(), "llm", {"provider": "anthropic", "model": "claude-sonnet-4"})
    computed = b.account_llm(op, Usage.from_anthropic(ANTHROPIC_USAGE))
    reported = b.account_llm(op, Usage.from_anthropic(ANTHROPIC_USAGE), cost_usd="0.01")
    unknown = b.account_llm(op, Usage(input=1), model="not-a-model")
    assert (computed.cost_usd, computed.cost_source) == (Decimal("0.0062775"), "computed")
    assert computed.price_table == builtin_prices().name
    assert (reported.cost_usd, reported.cost_source, reported.price_table) == (
        Decimal("0.01"), "provider", None)
    assert (unknown.cost_usd, unknown.cost_source) == (None, "none")
    assert b.totals.cost_usd == Decimal("0.0162775") and b.totals.unpriced_calls == 1


def test_router_actual_model_is_priced() -> None:
    entry = Accounting(timestamp=1, provider="openrouter", model="auto",
                       actual_provider="anthropic", actual_model="claude-sonnet-4",
                       usage=Usage.from_anthropic(ANTHROPIC_USAGE))
    priced = price_accounting(entry, builtin_prices())
    assert priced.cost_usd == Decimal("0.0062775")
    assert price_accounting(entry, NO_PRICES).cost_usd is None


def test_genai_prices_agrees_with_the_shipped_table() -> None:
    genai_prices = pytest.importorskip("genai_prices")
    from sessiontree.optree import GenaiPricesTable

    ours, theirs = builtin_prices(), GenaiPricesTable()
    assert theirs.name == f"genai-prices@{genai_prices.__version__}"
    usages = [Usage(input=1000, cache_read=300, cache_write=50, output=200),
              Usage(input=250_000, cache_read=0, output=10)]
    checked = 0
    for provider in ours.providers():
        for model in list(ours._models[provider]):
            for usage in usages:
                assert ours.cost(usage, provider, model) == theirs.cost(usage, provider, model), \
                    (provider, model, usage)
                checked += 1
    assert checked > 60


def test_genai_prices_worked_example() -> None:
    pytest.importorskip("genai_prices")
    from sessiontree.optree import GenaiPricesTable

    table = GenaiPricesTable()
    assert table.cost(Usage.from_anthropic(ANTHROPIC_USAGE), "anthropic", "claude-sonnet-4") == \
        Decimal("0.0062775")
    assert table.cost(Usage(input=1), "anthropic", "not-a-model") is None


def test_missing_extra_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "genai_prices", None)
    from sessiontree.optree import GenaiPricesTable

    with pytest.raises(MissingExtra, match=r"pip install 'sessiontree\[prices\]'"):
        GenaiPricesTable()
