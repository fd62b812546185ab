"""Read ``config/<env>.yaml`` into a validated :class:`EnvironmentConfig`, or fail with one line per problem."""

from __future__ import annotations

import os
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hyperpod_dpd.config.base import YamlOctal
from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.errors import MISSING, ConfigError, Issue

CONFIG_DIR_VARIABLE = "HPDPD_CONFIG_DIR"


def config_dir(explicit: Path | str | None = None) -> Path:
    """Where the configuration lives: ``explicit`` (``--config-dir``), else ``$HPDPD_CONFIG_DIR``, else ``./config``.

    Resolved when called, from the current directory: never from where the package is installed.
    """
    if explicit:
        return Path(explicit)
    from_environment = os.environ.get(CONFIG_DIR_VARIABLE)
    return Path(from_environment) if from_environment else Path.cwd() / "config"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_OCTAL = re.compile(r"[-+]?0[0-7_]+")


def _construct_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    """YAML 1.1 reads ``010`` as octal 8 (YAML 1.2: decimal 10); keep the text so the checks can refuse it."""
    value = loader.construct_yaml_int(node)
    return YamlOctal(value, node.value) if _OCTAL.fullmatch(node.value) else value


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def display_path(path: Path) -> str:
    """A path as error messages show it: relative to the current directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(annotation) for t in _unwrap(arg) if t is not type(None)]
    return [annotation]


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the model that sits at ``loc`` (used to say what an unknown key could have been)."""
    current: list[Any] = [model]
    for part in loc:
        following: list[Any] = []
        for candidate in current:
            if isinstance(part, int):
                origin = typing.get_origin(candidate)
                if origin in (tuple, list):
                    following.extend(_unwrap(typing.get_args(candidate)[0]))
            elif isinstance(candidate, type) and issubclass(candidate, BaseModel) and part in candidate.model_fields:
                following.extend(_unwrap(candidate.model_fields[part].annotation))
            elif typing.get_origin(candidate) is dict:
                following.extend(_unwrap(typing.get_args(candidate)[1]))
        current = following
    for candidate in current:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return list(candidate.model_fields)
    return None


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def _path(loc: tuple[Any, ...]) -> str:
    """``a.b[0].c``; a key that is not plain text (spaces, control characters) is quoted so the message stays one line."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.match(str(part)):
            out += f"[{str(part)!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def issues_from_validation(error: ValidationError, model: type[BaseModel]) -> list[Issue]:
    """Turn pydantic's errors into the toolkit's ``path: value: message`` issues."""
    issues = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        kind = item["type"]
        if kind == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1]) or []
            issues.append(Issue(_path(loc), loc[-1], f"unknown key; allowed keys here: {', '.join(allowed)}"))
        elif kind == "missing":
            issues.append(Issue(_path(loc), MISSING, "is required"))
        else:
            message = item["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            issues.append(Issue(_path(loc), item.get("input"), message))
    return issues


def read_yaml(path: Path) -> Any:
    source = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError.single(source, "<file>", str(path), "no such file") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        lines = text.splitlines()
        if mark is not None:
            where, value = f"line {mark.line + 1}", lines[mark.line].strip() if mark.line < len(lines) else ""
        else:
            where, value = "<file>", str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError.single(source, where, value, f"invalid YAML: {problem}") from None


def parse_environment(data: Any, *, name: str, source: str, base_dir: Path) -> EnvironmentConfig:
    """Validate already-parsed data; used by the loader and by tests and tools that build configs in memory."""
    if not isinstance(data, dict):
        raise ConfigError.single(source, "<root>", data, "must be a mapping of configuration keys")
    try:
        env = EnvironmentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, issues_from_validation(exc, EnvironmentConfig)) from None
    env._name = name
    env._base_dir = base_dir
    env._source = source
    problems = list(env.issues())
    if problems:
        raise ConfigError(source, problems)
    return env


# Files in config/ that are not environments: pipeline.yaml configures the promotion pipeline (hpdpd.config.pipeline).
RESERVED_NAMES = ("pipeline",)


def selected_environments() -> list[str] | None:
    """``HPDPD_ENVIRONMENTS=dev,staging`` -> ``["dev", "staging"]``; unset or empty -> None (every environment)."""
    value = os.environ.get("HPDPD_ENVIRONMENTS")
    if not value:
        return None
    return [name.strip() for name in value.split(",") if name.strip()] or None


def list_environments(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in config_dir(directory).glob("*.yaml") if p.stem not in RESERVED_NAMES)


def load_environment(name: str, directory: Path | None = None) -> EnvironmentConfig:
    """Load ``<config dir>/<name>.yaml``; every problem is a :class:`ConfigError` naming file, field and value."""
    directory = config_dir(directory)
    path = directory / f"{name}.yaml"
    source = display_path(path)
    if name in RESERVED_NAMES:
        available = ", ".join(list_environments(directory)) or "none"
        raise ConfigError.single(source, "<file>", name, "reserved for the promotion pipeline's settings, not an "
                                 f"environment; available environments: {available}")
    if not path.is_file():
        available = ", ".join(list_environments(directory)) or "none"
        hint = "" if directory.is_dir() else f" (no directory {display_path(directory)}: pass --config-dir or set {CONFIG_DIR_VARIABLE})"
        raise ConfigError.single(source, "<file>", name,
                                 f"no such environment file; available environments: {available}{hint}")
    return parse_environment(read_yaml(path), name=name, source=source, base_dir=directory.parent)


def load_all(directory: Path | None = None, names: list[str] | None = None) -> list[EnvironmentConfig]:
    """Load ``names`` (default: ``$HPDPD_ENVIRONMENTS``, else every environment of the directory); all of them are
    validated before anything is synthesized."""
    directory = config_dir(directory)
    return [load_environment(n, directory) for n in (names or selected_environments() or list_environments(directory))]
