"""Schema validation of rendered manifests, offline (there is no API server to dry-run against).

* Custom resources: the ``openAPIV3Schema`` of the vendored CRD (``k8s/crds/``) through jsonschema, plus a strict walk
  that rejects fields the schema does not declare (the API server would prune them silently).
* Core kinds: ``kubernetes-validate`` in strict mode for the cluster's Kubernetes version.

Every problem raises :class:`ConfigError` naming the object (``Kind namespace/name``) and the JSON path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import jsonschema
import kubernetes_validate

from hyperpod_dpd.config.endpoints import is_unresolved
from hyperpod_dpd.config.iec_schema import CRD_DIR as CRD_DIR  # re-exported: defined here before
from hyperpod_dpd.config.iec_schema import crd_schemas as crd_schemas  # the schemas the configuration checks with
from hyperpod_dpd.config.iec_schema import field_path as _path
from hyperpod_dpd.config.iec_schema import unknown_fields as unknown_fields
from hyperpod_dpd.errors import MISSING, ConfigError, Issue

# kubernetes-validate reads its schema files (the definitions file alone is megabytes) on every call; the files never
# change within a process, so read each once.
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents)
_REQUIRED = re.compile(r"^'([^']+)' is a required property$")


@functools.cache
def _crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schemas()[(api_version, kind)])


def describe(manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` for cluster-scoped objects), as used in error messages."""
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name", "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{manifest.get('kind', '<no kind>')} {namespace + '/' if namespace else ''}{name}"


def crd_issues(manifest: Mapping[str, Any]) -> Iterator[Issue]:
    """Schema errors and undeclared fields of a custom resource; unresolved deploy-time tokens are not judged."""
    key = (manifest.get("apiVersion", ""), manifest.get("kind", ""))
    for error in sorted(_crd_validator(*key).iter_errors(manifest), key=lambda e: [str(p) for p in e.absolute_path]):
        if is_unresolved(error.instance):
            continue
        missing = _REQUIRED.match(error.message) if error.validator == "required" else None
        if missing:
            yield Issue(_path([*error.absolute_path, missing.group(1)]), MISSING, "is required by the CRD schema")
        else:
            yield Issue(_path(error.absolute_path), error.instance, error.message)
    yield from unknown_fields(manifest, crd_schemas()[key], ())


def core_issues(manifest: Mapping[str, Any], kubernetes_version: str) -> Iterator[Issue]:
    """The first problem ``kubernetes-validate --strict`` finds in a core object (it stops at one)."""
    try:
        kubernetes_validate.validate(dict(manifest), kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        yield Issue("kind", manifest.get("kind"),
                    f"{manifest.get('apiVersion')} has no schema in Kubernetes {kubernetes_version} and no CRD in "
                    f"{CRD_DIR.name}/; vendor its CRD to validate it")
    except kubernetes_validate.utils.VersionNotSupportedError:
        yield Issue("<kubernetes version>", kubernetes_version, "is not supported by the installed kubernetes-validate")
    except kubernetes_validate.ValidationError as error:
        yield Issue(_path(error.absolute_path), error.instance, error.message.splitlines()[0])


def manifest_issues(manifest: Mapping[str, Any], *, kubernetes_version: str) -> list[Issue]:
    if (manifest.get("apiVersion"), manifest.get("kind")) in crd_schemas():
        return list(crd_issues(manifest))
    return list(core_issues(manifest, kubernetes_version))


def validate_manifest(manifest: Mapping[str, Any], *, kubernetes_version: str) -> None:
    """Raise :class:`ConfigError` (``Kind namespace/name: json.path: value: message``) if ``manifest`` is invalid."""
    problems = manifest_issues(manifest, kubernetes_version=kubernetes_version)
    if problems:
        raise ConfigError(describe(manifest), problems)


def validate_manifests(manifests: Iterable[Mapping[str, Any]], *, kubernetes_version: str) -> None:
    """Validate every manifest; the first invalid object raises with all of its problems."""
    for manifest in manifests:
        validate_manifest(manifest, kubernetes_version=kubernetes_version)
