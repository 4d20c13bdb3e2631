"""The ``ops`` command: the operation tree recorded in a session file, and its totals."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from .. import _json
from ._app import SESSION_MAYBE, cli, echo_json, json_option, open_session, reports_errors

__all__ = ["ops"]


def _totals_rows(tree: Any) -> list[dict[str, Any]]:
    rows = []
    for root in tree.roots():
        stack = [(0, root)]
        while stack:
            depth, run = stack.pop()
            rows.append({"run": run.run_id, "agentId": run.agent_id, "depth": depth,
                         "parent": run.parent.run if run.parent else None,
                         "own": run.own.to_builtins(), "rollup": run.rollup.to_builtins()})
            stack.extend((depth + 1, child) for child in reversed(tree.children(run)))
    return rows


@cli.command("ops")
@click.argument("file", type=SESSION_MAYBE)
@json_option
@click.option("--style", type=click.Choice(["tree", "compat"]), default="tree", show_default=True,
              help="tree: every sub-agent run in full with its totals; compat: ai-agent's "
                   "renderAscii layout.")
@reports_errors
def ops(file: str, as_json: bool, style: str) -> None:
    """Print the operation tree of FILE (runs, turns, operations, sub-agent runs) as an ASCII
    tree, then a table of each run's totals: own (its operations) and rollup (with its
    sub-agents).

    The tree is rebuilt from FILE's sessiontree.op custom entries; a run that never ended is
    marked unfinished. --json prints the tree as JSON (costs as decimal strings) with a flat
    "totals" list and "sessionUsage": the whole session's tokens and cost as pi counts them
    (every assistant message, usage entry and summary, not only the recorded operations). The
    text output ends with the same session totals.
    """
    from ..optree.persist import optree_from_session
    from ..optree.render import optree_to_builtins, render_ascii, totals_table
    from ..usage import session_usage

    session = open_session(file)
    with session:
        tree = optree_from_session(session)
        usage = session_usage(session)
    for problem in tree.problems:
        where = f" (entry {problem.entry_id})" if problem.entry_id else ""
        click.echo(f"warning: {problem.custom_type}{where}: {problem.reason}", err=True)
    if as_json:
        data = optree_to_builtins(tree)
        data["totals"] = _totals_rows(tree)
        data["sessionUsage"] = {**msgspec.structs.asdict(usage), "tokens": usage.tokens}
        echo_json(_json.dumps(data))
        return
    if not tree.runs:
        click.echo(f"{file}: no operation tree (no sessiontree.op entries)")
        return
    for root in tree.roots():
        click.echo(render_ascii(tree, root, style="compat" if style == "compat" else "tree"))
        click.echo()
    click.echo(totals_table(tree))
    click.echo(f"session (as pi counts it): {usage.tokens:,} tokens, ${usage.cost:.6f}")
