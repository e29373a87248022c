"""Temporary directories that a killed process does not leave behind for good.

Every temporary directory dflash-trt makes beside its output (a build's engine directory being written, ModelOpt's
export, a Triton model being swapped in, `serve`'s model repository) is named `<prefix><pid>-<random>`: the next
process that makes one with the same prefix in the same place removes those whose process no longer runs (a
SIGKILLed build or server never gets to clean up). A live process's directories are never touched, and a pid reused
by an unrelated live process only delays the cleanup.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale(parent: str | os.PathLike, prefix: str) -> list[Path]:
    """Remove `parent/<prefix><pid>-*` entries whose process is gone; returns what was removed."""
    removed = []
    parent = Path(parent)
    if not parent.is_dir():
        return removed
    for path in parent.glob(f"{glob_escape(prefix)}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def owned_name(prefix: str, tag: str) -> str:
    """`<prefix><pid>-<tag>`: a name `remove_stale` recognises as this process's."""
    return f"{prefix}{os.getpid()}-{tag}"


def make_tempdir(parent: str | os.PathLike, prefix: str) -> Path:
    """A new private directory `parent/<prefix><pid>-<random>`, after removing stale ones of the same prefix."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
