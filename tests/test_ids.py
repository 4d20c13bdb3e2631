"""Entry ids and timestamps as pi writes them (sessiontree._time): drawn ahead in blocks, never
one in use, never the same in a forked child as in its parent."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys

import pytest

from sessiontree import _time
from sessiontree._time import iso_now, new_entry_id


def test_ids_are_eight_hex_digits_and_differ_across_blocks() -> None:
    drawn = [new_entry_id(()) for _ in range(3 * 256 + 5)]  # more than three blocks
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in drawn)
    assert len(set(drawn)) == len(drawn)


def test_an_id_in_use_is_drawn_again() -> None:
    new_entry_id(())  # a block is drawn
    taken = {_time._drawn[-1], _time._drawn[-2]}  # the next two
    fresh = new_entry_id(taken)
    assert fresh not in taken
    assert re.fullmatch(r"[0-9a-f]{8}", fresh)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_draws_its_own_ids() -> None:
    new_entry_id(())  # the parent holds ids drawn ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(write, "".join(new_entry_id(()) for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(new_entry_id(()) for _ in range(4))
    assert len(child) == 32 and child != parent


def test_iso_now_is_javascripts_to_iso_string() -> None:
    before = dt.datetime.now(dt.timezone.utc)
    text = iso_now()
    after = dt.datetime.now(dt.timezone.utc)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text)
    moment = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= moment <= after


@pytest.mark.parametrize(("ns", "text"), [(500_000_000, "1970-01-01T00:00:00.500Z"),
                                          (1_000_000, "1970-01-01T00:00:00.001Z")])
def test_iso_now_formats_a_first_clock_early_in_1970(ns: int, text: str) -> None:
    """The first call formats its second whatever the clock says: the cache's start value once
    matched a clock between 1 and 1000 ms (an IndexError, or the empty text for its second)."""
    code = ("import time; from sessiontree._time import iso_now; "
            f"time.time_ns = lambda: {ns}; print(iso_now())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == text
