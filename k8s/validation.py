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
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from hyperpod_dpd.config.base import join
from hyperpod_dpd.config.endpoints import is_unresolved
from hyperpod_dpd.errors import MISSING, ConfigError, Issue
from hyperpod_dpd.k8s.extensions import extend_schemas

CRD_DIR = Path(__file__).resolve().parent / "crds"

# kubernetes-validate reads its schema files (the definitions file alone is megabytes) on every call; the files never
# change within a process, so read each once.
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents)
_REQUIRED = re.compile(r"^'([^']+)' is a required property$")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


@functools.lru_cache(maxsize=1)
def crd_schemas() -> Mapping[tuple[str, str], Mapping[str, Any]]:
    """``(apiVersion, kind)`` -> ``openAPIV3Schema`` of every version of every vendored CRD (IEC ``v1`` extended)."""
    schemas: dict[tuple[str, str], Mapping[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        # libyaml's loader when PyYAML has it: the vendored CRD is ~450 KB, ten times faster to parse in C
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        for crd in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):  # noqa: S506 - a safe loader
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    # The IEC fields of later operators that hyperpod-dpd renders (hyperpod_dpd.k8s.extensions), and only those.
    return extend_schemas(schemas)


@functools.cache
def _crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schemas()[(api_version, kind)])


def describe(manifest: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` for cluster-scoped objects), as used in error messages."""
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name", "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{manifest.get('kind', '<no kind>')} {namespace + '/' if namespace else ''}{name}"


def _path(parts: Iterable[Any]) -> str:
    """``spec.worker.args[0]``; keys that contain dots or slashes are quoted: ``requests['nvidia.com/gpu']``."""
    out = ""
    for part in parts:
        if isinstance(part, str) and not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]"
        else:
            out = join(out, part)
    return out or "<root>"


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


def unknown_fields(value: Any, schema: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[Issue]:
    """Fields the schema does not declare; Kubernetes would drop them without a word."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is None and not isinstance(extra, dict):
            return  # a free-form object (e.g. metadata), validated by the API server itself
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from unknown_fields(item, properties[key], (*path, key))
            elif isinstance(extra, dict):
                yield from unknown_fields(item, extra, (*path, key))
            else:
                allowed = ", ".join(sorted(properties or {}))
                yield Issue(_path((*path, key)), key, f"is not a field of the CRD schema; allowed here: {allowed}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], (*path, index))


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
