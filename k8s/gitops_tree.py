"""Writing the GitOps tree: a directory the writer owns, deterministic bytes, and nothing stale left behind.

The writer owns a directory through its marker file :data:`MARKER` (JSON: the files it wrote, relative to the
directory, sorted). It refuses a non-empty directory without one, so ``--out`` can never overwrite or delete what
someone else put there; and each write deletes the files of its previous write that it no longer renders (a removed
endpoint, a removed or renamed environment), and only those. Files it did not write (a README, an Argo CD
Application of the team's) are left alone, and a rendered file that would replace one of them is refused.

A directory written by the writer before the marker existed holds only ``<env>/<endpoint>.k8s.yaml`` files; such a
directory is adopted (those files count as its own) so ``make synth`` keeps working over an old ``dist/k8s``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from hyperpod_dpd.errors import HpdpdError
from hyperpod_dpd.k8s.gitops_render import SUFFIX, EnvironmentTree, environment_of

MARKER = ".hpdpd-gitops"
MARKER_FORMAT = 1
HEADER = "# Written by python -m hyperpod_dpd.k8s.gitops from the environment's configuration: do not edit.\n"
# The layout of the writer before the marker: <env>/<endpoint>.k8s.yaml, nothing else.
_LEGACY_FILE = re.compile(r"[^/]+/[^/]+" + re.escape(SUFFIX))


class GitOpsTreeError(HpdpdError):
    """The output directory cannot be written: one line naming it and why."""


@dataclass(frozen=True, kw_only=True)
class WriteResult:
    """What one write did: files written and deleted (relative to the directory), by environment for the written."""

    written: Mapping[str, tuple[str, ...]]
    deleted: tuple[str, ...]


def dump(documents: Sequence[Mapping[str, Any]]) -> bytes:
    """Deterministic YAML: sorted keys, block style, no width folding, the same bytes for the same objects."""
    text = yaml.safe_dump_all(list(documents), sort_keys=True, default_flow_style=False, width=10_000,
                              allow_unicode=True, explicit_start=len(documents) > 1)
    return (HEADER + text).encode("utf-8")


def _safe_relative(entry: Any, out: Path) -> str:
    """A marker entry must be a plain relative path inside the directory: the writer never deletes outside it."""
    if not isinstance(entry, str) or not entry:
        raise GitOpsTreeError(f"{out / MARKER}: {entry!r}: is not a file path; delete the marker's directory or "
                              "write the tree elsewhere (--out)")
    path = PurePosixPath(entry)
    if path.is_absolute() or ".." in path.parts or entry != path.as_posix() or entry == MARKER:
        raise GitOpsTreeError(f"{out / MARKER}: {entry!r}: is not a path inside the directory; it was not written "
                              "by this writer")
    return entry


def owned_files(out: Path) -> set[str]:
    """The files the writer owns in ``out`` (empty for a missing or empty directory); refuses one it does not own."""
    if not out.exists():
        return set()
    if not out.is_dir():
        raise GitOpsTreeError(f"{out}: is not a directory; choose a directory for the GitOps tree (--out)")
    marker = out / MARKER
    if marker.is_file():
        try:
            data = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GitOpsTreeError(f"{marker}: unreadable ({exc.__class__.__name__}); it must be the JSON this writer "
                                  "writes") from None
        if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT or not isinstance(data.get("files"), list):
            raise GitOpsTreeError(f"{marker}: not a marker of this writer (format {MARKER_FORMAT} with a list of "
                                  "files expected)")
        return {_safe_relative(entry, out) for entry in data["files"]}
    present = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir())
    if not present and not any(out.iterdir()):
        return set()
    if present and all(_LEGACY_FILE.fullmatch(p) for p in present):
        return set(present)  # the writer's layout before the marker
    raise GitOpsTreeError(f"{out}: not empty and not written by this writer (no {MARKER}); choose an empty or new "
                          "directory (--out), or one this writer owns")


def write_tree(out: Path, trees: Sequence[EnvironmentTree], *, known: Collection[str] | None = None) -> WriteResult:
    """Write ``trees`` into ``out`` (each under ``<env>/``) and delete what the previous write rendered and this one
    does not.

    ``known``: every environment of the configuration directory. An environment the marker lists that is not known
    was removed or renamed, and its files go; a known one that is not written this time (``--env`` or
    ``$HPDPD_ENVIRONMENTS`` selected others) keeps its files. Without ``known`` (a caller writing environments one at
    a time) no other environment's files are deleted.
    """
    previous = owned_files(out)
    rendered: dict[str, bytes] = {}
    written: dict[str, tuple[str, ...]] = {}
    for tree in trees:
        paths = []
        for relative, documents in sorted(tree.files.items()):
            path = f"{tree.directory}/{relative}"
            rendered[path] = dump(documents)
            paths.append(path)
        written[tree.name] = tuple(paths)
    for path in sorted(rendered):
        if path not in previous and (out / path).exists():
            raise GitOpsTreeError(f"{out / path}: exists and was not written by this writer; move it, or write the "
                                  "tree elsewhere (--out)")
    selected = set(written)
    if known is None:
        kept = {p for p in previous if environment_of(p) not in selected}
    else:
        kept = {p for p in previous if environment_of(p) in set(known) - selected}
    stale = sorted(p for p in previous - set(rendered) - kept)
    out.mkdir(parents=True, exist_ok=True)
    # The marker first names every file this write may leave behind, so an interrupted write still owns them all.
    _write_marker(out, previous | set(rendered))
    for path, data in sorted(rendered.items()):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() and target.read_bytes() == data:
            continue  # unchanged: leave its timestamps alone
        temporary = target.with_name(f".{target.name}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)  # a failed write leaves no partial file behind
    for path in stale:
        target = out / path
        if target.is_file() or target.is_symlink():
            target.unlink()
        _remove_empty_parents(target.parent, out)
    _write_marker(out, set(rendered) | kept)
    return WriteResult(written=written, deleted=tuple(stale))


def _write_marker(out: Path, files: set[str]) -> None:
    marker = {"format": MARKER_FORMAT, "files": sorted(files)}
    temporary = out / f"{MARKER}.tmp"
    temporary.write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, out / MARKER)


def _remove_empty_parents(directory: Path, root: Path) -> None:
    """Remove ``directory`` and its parents up to (not including) ``root`` while they are empty."""
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()  # only an empty directory: anything the writer did not write keeps it
        except OSError:
            return
        directory = directory.parent
