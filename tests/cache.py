"""Results the suite keeps in ``.cache/`` between runs, each under a key of everything it is a function of (the inputs'
bytes and the tool's version), so a hit is exactly what the tool would give again. docs/testing.md lists them;
``HPDPD_TEST_CACHE=off`` recomputes every one, ``make clean`` removes them."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.paths import ROOT

CACHE_ROOT = ROOT / ".cache" / "test-validators"


def enabled() -> bool:
    return os.environ.get("HPDPD_TEST_CACHE", "on") != "off"


def key(*parts: bytes | str) -> str:
    """sha256 over the parts, each length-prefixed (no two different lists of parts give the same bytes)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def files_key(paths: Iterable[Path]) -> list[bytes | str]:
    """Key parts for files: each one's path and bytes."""
    parts: list[bytes | str] = []
    for path in paths:
        parts += [str(path), path.read_bytes()]
    return parts


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if needed), for as long as the block runs: two workers or two runs
    that need the same entry make it once, the second then finds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_json(path: Path) -> Any | None:
    """A kept result, or None when there is none (or caching is off)."""
    if not enabled() or not path.is_file():
        return None
    return json.loads(path.read_text())


def write_json(path: Path, value: Any) -> None:
    """Keep a result (atomically: two workers writing the same key leave one whole file)."""
    if not enabled():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(value))
    partial.replace(path)
