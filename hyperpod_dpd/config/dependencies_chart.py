"""``hyperpod.dependencies_chart``: where the HyperPod dependencies Helm chart comes from, pinned by its digest.

Upstream never changes the chart's version (``HYPERPOD_CHART_VERSION``, see catalogue.versions), so a version pins
nothing. What pins it is ``digest``, required for both sources:

- ``repository`` (an ECR private registry the chart is mirrored to): the OCI manifest digest of the pushed chart, the
  ``Digest:`` line ``helm push`` prints and ECR's ``imageDigest``. aws-cdk-lib's Helm handler pulls by tag only (see
  infra/chart_digest.py), so a check at deploy compares the tag's digest in ECR with this one before Helm runs.
- ``local_path`` (a chart directory shipped as a CDK asset): the sha256 of the directory's file listing, checked at
  synth (:func:`directory_digest`).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from hyperpod_dpd.catalogue.versions import DIGEST_PATTERN, HYPERPOD_CHART_NAME, HYPERPOD_CHART_VERSION
from hyperpod_dpd.config.base import Model, join
from hyperpod_dpd.errors import MISSING, Issue

# An ECR private registry, as aws-cdk-lib's Helm handler recognises one to log in to it (private_ecr_pattern in
# aws-cdk-lib 2.275.0 custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py:
# ``oci://<digits>.dkr.ecr.<region>.<domain>``), with the path the chart is pushed under (``helm push <tgz>
# oci://<registry>/<path>`` stores it in the repository ``<path>/<chart name>``). Repository names: lower-case
# components separated by ``/`` (ECR CreateRepository, repositoryName pattern).
ECR_REGISTRY = re.compile(r"^oci://(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(-[a-z]+)+-\d)"
                          r"\.(?P<domain>amazonaws\.com(\.cn)?)(?P<path>(/[a-z0-9]+([._-][a-z0-9]+)*)*)$")
ECR_REPOSITORY_NAME_MAX = 256  # ECR CreateRepository: repositoryName, 2-256 characters
# Bounds of a local chart directory: the chart is a few hundred files; a wrong path (a home directory) ends fast.
MAX_CHART_FILES = 5000
MAX_CHART_BYTES = 512 * 1024 * 1024
DIRECTORY_DIGEST_HOW = ("the sha256 of the 'sha256sum' listing of its files, sorted by path: "
                        "cd <dir> && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum")


class ChartDirectoryError(ValueError):
    """A local chart directory that cannot be digested (a symlink, an odd file name, too large, unreadable)."""


@dataclass(frozen=True, kw_only=True)
class EcrChart:
    """The chart's repository in an ECR private registry: what the deploy-time digest check asks ECR about."""

    account: str
    region: str
    domain: str
    repository_name: str  # ``<path>/hyperpod-helm-chart``, where ``helm push`` put it

    @property
    def reference(self) -> str:
        """The OCI reference of the chart itself (registry, repository), what the Helm handler pulls by tag."""
        return f"oci://{self.account}.dkr.ecr.{self.region}.{self.domain}/{self.repository_name}"


def ecr_chart(repository: str) -> EcrChart | None:
    """Where ``helm push <chart>.tgz <repository>`` put the chart in ECR; None when ``repository`` is no ECR registry."""
    match = ECR_REGISTRY.match(repository)
    if not match:
        return None
    name = f"{match['path'].strip('/')}/{HYPERPOD_CHART_NAME}".lstrip("/")
    if len(name) > ECR_REPOSITORY_NAME_MAX:
        return None
    return EcrChart(account=match["account"], region=match["region"], domain=match["domain"], repository_name=name)


def directory_digest(directory: Path) -> str:
    """``sha256:`` of the listing ``sha256sum`` prints for every file of ``directory`` (``<hex>  ./<path>``, one per
    line, paths sorted by their bytes as ``LC_ALL=C sort`` does), so the digest can be made with coreutils alone
    (:data:`DIRECTORY_DIGEST_HOW`). Refuses what such a listing cannot express or the CDK asset would not copy as it
    is: symlinks, file names with a newline or a backslash (sha256sum escapes them), special files."""
    entries: list[tuple[bytes, Path]] = []
    total = 0
    for folder, dirs, files in os.walk(directory, onerror=_raise):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            relative = "./" + path.relative_to(directory).as_posix()
            if stat.S_ISLNK(mode):
                raise ChartDirectoryError(f"{relative} is a symlink; copy the file it points to instead")
            if "\n" in relative or "\\" in relative:
                raise ChartDirectoryError(f"{relative!r} has a newline or backslash in its name")
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise ChartDirectoryError(f"{relative} is not a regular file")
            total += path.stat().st_size
            entries.append((os.fsencode(relative), path))
            if len(entries) > MAX_CHART_FILES or total > MAX_CHART_BYTES:
                raise ChartDirectoryError(f"holds more than {MAX_CHART_FILES} files or {MAX_CHART_BYTES >> 20} MiB; "
                                          "is it the chart directory?")
    listing = hashlib.sha256()
    for encoded, path in sorted(entries):
        listing.update(f"{_file_sha256(path)}  ".encode() + encoded + b"\n")
    return f"sha256:{listing.hexdigest()}"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _raise(error: OSError) -> None:
    raise ChartDirectoryError(f"cannot be read ({error.strerror or error}: {error.filename})")


class DependenciesChart(Model):
    """Where the HyperPod dependencies Helm chart comes from: an ECR mirror, or a local directory shipped as an asset;
    either way with the digest of exactly what is installed."""

    repository: str | None = Field(default=None, pattern=r"^oci://[a-z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)?$")
    version: str = HYPERPOD_CHART_VERSION
    local_path: str | None = None
    digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    timeout_minutes: int = Field(default=15, ge=1, le=15)

    @model_validator(mode="after")
    def _one_source(self) -> DependenciesChart:
        if (self.repository is None) == (self.local_path is None):
            raise ValueError("set exactly one of 'repository' (an oci:// mirror) or 'local_path' (a chart directory)")
        return self

    @property
    def ecr(self) -> EcrChart | None:
        return ecr_chart(self.repository) if self.repository is not None else None

    def issues(self, root: Any, path: str) -> Iterator[Issue]:
        if self.repository is not None:
            yield from self._repository_issues(path)
        elif self.local_path is not None:
            yield from self._local_issues(root, path)

    def _repository_issues(self, path: str) -> Iterator[Issue]:
        if self.ecr is None:
            yield Issue(join(path, "repository"), self.repository,
                        "must be an ECR private registry, oci://<account>.dkr.ecr.<region>.amazonaws.com[/<path>] "
                        "(where 'helm push' put the chart): the chart's digest is checked at deploy through ECR")
        if self.digest is None:
            yield Issue(join(path, "digest"), MISSING,
                        "required with 'repository': the 'Digest: sha256:...' that 'helm push' printed for the chart "
                        "(README, \"The HyperPod dependencies chart\"); the deploy fails unless ECR has that digest "
                        f"under tag {self.version}")

    def _local_issues(self, root: Any, path: str) -> Iterator[Issue]:
        assert self.local_path is not None
        directory = root.resolve_path(self.local_path)
        chart = directory / "Chart.yaml"
        if not chart.is_file():
            yield Issue(join(path, "local_path"), self.local_path,
                        f"must be a chart directory containing Chart.yaml (looked for {chart}); "
                        "copy the HyperPod dependencies chart there (with 'helm dependency build' run in it) or use an "
                        "oci:// repository")
            return
        try:
            found = directory_digest(directory)
        except (ChartDirectoryError, OSError) as error:
            yield Issue(join(path, "local_path"), self.local_path, f"{directory}: {error}")
            return
        if self.digest is None:
            yield Issue(join(path, "digest"), MISSING,
                        f"required with 'local_path': {DIRECTORY_DIGEST_HOW}; {directory} hashes to {found} now: "
                        "record it once you have reviewed the chart")
        elif self.digest != found:
            yield Issue(join(path, "digest"), self.digest,
                        f"{directory} hashes to {found}: the chart changed since its digest was recorded; review the "
                        "change, then record the new digest")
