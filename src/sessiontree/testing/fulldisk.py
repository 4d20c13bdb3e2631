"""A file system that fills up for real, for the full-disk tests and the robustness suite: a
small tmpfs mounted on a folder (this needs root, or the mount capability).

A full disk is never simulated by patching: writes fail with the kernel's own ``ENOSPC``.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DiskUnavailable", "fill", "small_disk"]


class DiskUnavailable(RuntimeError):
    """This process may not mount a file system (not root): the caller skips."""


@contextmanager
def small_disk(folder: str | os.PathLike[str], size: int = 512 << 10) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` bytes on ``folder`` (created) for the ``with`` block.

    Raises:
        DiskUnavailable: the mount was refused.
    """
    where = Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                              str(where)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        raise DiskUnavailable(f"cannot mount a tmpfs on {where}: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: str | os.PathLike[str], leave: int = 0) -> Path:
    """Fill the file system of ``folder`` with a file (returned; remove it to free the space)
    until a write fails with ``ENOSPC``, then give back ``leave`` bytes of it."""
    path = Path(folder) / "filler"
    block = b"\0" * 4096
    with open(path, "wb", buffering=0) as stream:
        while True:
            try:
                stream.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        if leave:
            stream.truncate(max(0, stream.tell() - leave))
    return path
