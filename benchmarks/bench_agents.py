"""The OpenAI Agents SDK session: SessionTreeSession beside the SDK's own SQLiteSession, one run.

    .venv/bin/python benchmarks/bench_agents.py [--turns 1000] [--per-turn 10]

Workload, what ``Runner.run`` does with a session each turn: ``get_items()`` (the whole
history), then ``add_items()`` of the turn's items (a user message, a reasoning item, function
calls and their outputs, the assistant's answer: ``--per-turn`` of them), for ``--turns`` turns,
so the session grows to turns x per-turn items (10,000 by default). Each backend starts from an
empty database or folder in a temporary directory; one handle, one event loop, no other writer.

Rows: the SDK's ``SQLiteSession`` on a file (the baseline) and in memory; ``SessionTreeSession``
on SQLite (``sqlite:///``), on a JSONL sessions root and in memory. Figures: the mean time per
turn over all turns and over the last 100 (the biggest history), and the ratio to the baseline
(baseline ÷ row: above 1.0 is faster). The check column says whether the final ``get_items()``
equals the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agents.memory import SQLiteSession  # noqa: E402

from sessiontree.integrations.openai_agents import SessionTreeSession  # noqa: E402


def turn_items(turn: int, count: int) -> list[dict[str, Any]]:
    """The items one turn adds: a question, reasoning, tool calls with outputs, an answer."""
    made: list[dict[str, Any]] = [{"role": "user", "content": f"Question {turn}: the weather?"}]
    made.append({"type": "reasoning", "id": f"rs_{turn}", "summary": [
        {"type": "summary_text", "text": f"Turn {turn}: look the cities up."}]})
    calls = 0
    while len(made) < count - 1:
        call = f"call_{turn}_{calls}"
        made.append({"type": "function_call", "call_id": call, "name": "get_weather",
                     "arguments": f'{{"city": "City {calls}"}}'})
        if len(made) < count - 1:
            made.append({"type": "function_call_output", "call_id": call,
                         "output": f"sunny, {15 + calls}C in City {calls}"})
        calls += 1
    made.append({"type": "message", "role": "assistant", "id": f"msg_{turn}",
                 "status": "completed", "content": [
                     {"type": "output_text", "text": f"Answer {turn}: sunny everywhere.",
                      "annotations": []}]})
    return made[:count]


async def workload(session: Any, turns: int, per_turn: int) -> tuple[list[float], Any]:
    times = []
    for turn in range(turns):
        items = turn_items(turn, per_turn)
        start = time.perf_counter()
        await session.get_items()
        await session.add_items(items)
        times.append(time.perf_counter() - start)
    return times, await session.get_items()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--per-turn", type=int, default=10)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    makers = [
        ("SDK SQLiteSession, file (baseline)",
         lambda: SQLiteSession("bench", str(folder / "sdk.db"))),
        ("SDK SQLiteSession, :memory:", lambda: SQLiteSession("bench")),
        ("SessionTreeSession, sqlite:///",
         lambda: SessionTreeSession("bench", f"sqlite:///{folder}/tree.db")),
        ("SessionTreeSession, JSONL root",
         lambda: SessionTreeSession("bench", folder / "root", cwd="/bench")),
        ("SessionTreeSession, memory", lambda: SessionTreeSession("bench")),
    ]
    load_before = os.getloadavg()[0]
    results = []
    for label, make in makers:
        print(f"{label} …", file=sys.stderr, flush=True)
        session = make()
        times, final = asyncio.run(workload(session, args.turns, args.per_turn))
        session.close()
        results.append((label, times, final))
    load_after = os.getloadavg()[0]
    _, base_times, base_final = results[0]
    base_all = sum(base_times) / len(base_times)
    base_last = sum(base_times[-100:]) / len(base_times[-100:])
    print(f"Agents SDK session: {args.turns:,} turns of get_items() + add_items({args.per_turn}) "
          f"to {args.turns * args.per_turn:,} items — {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"load average {load_before:.2f} before, {load_after:.2f} after\n")
    print("| session | per turn (mean) | ratio | last 100 turns | ratio | same items |")
    print("|---|---|---|---|---|---|")
    for label, times, final in results:
        mean = sum(times) / len(times)
        last = sum(times[-100:]) / len(times[-100:])
        print(f"| {label} | {mean * 1e3:.2f} ms | {base_all / mean:.1f}x | {last * 1e3:.2f} ms "
              f"| {base_last / last:.1f}x | {'yes' if final == base_final else 'NO'} |")
    print("\nTarget: SessionTreeSession at least 2x faster per turn than the SDK's SQLiteSession.")


if __name__ == "__main__":
    main()
