"""Load and replay the operation-tree reference vectors (``tests/optree/vectors/vectors.json``)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessiontree.optree import CompatTreeBuilder
from sessiontree.optree._jsformat import UNDEFINED

VECTORS_FILE = Path(__file__).resolve().parent / "vectors" / "vectors.json"


def load_vectors() -> list[dict[str, Any]]:
    with VECTORS_FILE.open(encoding="utf-8") as fh:
        data: list[dict[str, Any]] = json.load(fh)
    return data


_SPECIAL = {"undefined": UNDEFINED, "NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def decode(value: Any, sessions: Callable[[str], Any] | None = None) -> Any:
    """Fresh Python objects for a JSON value with the vectors' ``$js``/``$session`` markers."""
    if isinstance(value, dict):
        if set(value) == {"$js"}:
            return _SPECIAL[value["$js"]]
        if set(value) == {"$session"}:
            assert sessions is not None
            return sessions(value["$session"])
        return {k: decode(v, sessions) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, sessions) for v in value]
    return value


class _NaN:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __repr__(self) -> str:
        return "NaN"


def canon(value: Any) -> Any:
    """A comparable form: ``undefined`` values dropped, NaN equal to NaN."""
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items() if v is not UNDEFINED}
    if isinstance(value, list):
        return [canon(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return _NaN()
    return value


def snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


class Replay:
    """Run a vector's calls against compat builders, checking returns and ``arg_after``."""

    def __init__(self, vector: dict[str, Any],
                 factory: Callable[..., Any] | None = None) -> None:
        self.vector = vector
        self.clock = vector["clock_start"]
        self.counter = 0
        self.builders: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.op_ids: list[str] = []
        self.factory = factory or self._compat

    def _compat(self, meta: Any) -> CompatTreeBuilder:
        return CompatTreeBuilder(meta, clock=self.now, ids=self.next_id, warn=self.warnings.append)

    def now(self) -> int:
        return self.clock  # type: ignore[no-any-return]

    def next_id(self) -> str:
        self.counter += 1
        return str(self.vector["id_format"]).replace("{n}", str(self.counter))

    def run(self) -> None:
        for call in self.vector["calls"]:
            self.step(call)

    def step(self, call: dict[str, Any]) -> None:
        method = call["method"]
        args = decode(call["args"], lambda name: self.builders[name].get_session())
        if method == "setClock":
            self.clock = args[0]
            return
        if method == "new":
            self.builders[call["builder"]] = self.factory(args[0] if args else UNDEFINED)
            return
        builder = self.builders[call["builder"]]
        if method == "getTotals":
            result = builder.get_session().get("totals", UNDEFINED)
        else:
            result = getattr(builder, snake(method))(*args)
        if method == "beginOp":
            self.op_ids.append(result)
        if "returns" in call:
            expected = decode(call["returns"])
            assert canon(result) == canon(expected), (self.vector["name"], call)
        if "arg_after" in call:
            assert canon(args[1]) == canon(decode(call["arg_after"])), (self.vector["name"], call)

    @property
    def root(self) -> Any:
        return self.builders[self.vector["root"]]
