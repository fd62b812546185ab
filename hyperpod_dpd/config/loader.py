"""Read ``config/<env>.yaml`` into a validated :class:`EnvironmentConfig`, or fail with one line per problem."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hyperpod_dpd.config.environment import EnvironmentConfig
from hyperpod_dpd.config.files import directory_problem, display_path, present, read_text
from hyperpod_dpd.config.identity import check_identity
from hyperpod_dpd.config.validation import issues_from_validation
from hyperpod_dpd.config.yaml_safe import YamlAmbiguities, YamlRefused, load_yaml
from hyperpod_dpd.errors import ConfigError, Verbatim

__all__ = ["CONFIG_DIR_VARIABLE", "RESERVED_NAMES", "config_dir", "display_path", "environment_name_problem",
           "issues_from_validation", "list_environments", "load_all", "load_environment", "parse_environment",
           "read_yaml", "selected_environments"]

CONFIG_DIR_VARIABLE = "HPDPD_CONFIG_DIR"


def config_dir(explicit: Path | str | None = None) -> Path:
    """Where the configuration lives: ``explicit`` (``--config-dir``), else ``$HPDPD_CONFIG_DIR``, else ``./config``.

    Resolved when called, from the current directory: never from where the package is installed.
    """
    if explicit:
        return Path(explicit)
    from_environment = os.environ.get(CONFIG_DIR_VARIABLE)
    return Path(from_environment) if from_environment else Path.cwd() / "config"


def read_yaml(path: Path) -> Any:
    """Parse ``path`` with the bounded loader (:mod:`hyperpod_dpd.config.yaml_safe`); every problem, from the file
    system to the last scalar, is one :class:`ConfigError` line naming the file."""
    source = display_path(path)
    text = read_text(path)
    try:
        return load_yaml(text)
    except YamlAmbiguities as exc:
        raise ConfigError(source, exc.issues) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a NUL, most control characters)
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError.single(source, f"line {line}", Verbatim(f"character {exc.position}"),
                                 f"invalid YAML: the character U+{exc.character:04X} is not allowed in a YAML file; "
                                 "write it as an escape inside double quotes (\"\\u0000\")") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if mark is not None:  # the line's text around the mark's character offset, however long the file
            floor, ceiling = max(0, mark.index - 4096), mark.index + 4096
            start = text.rfind("\n", floor, mark.index) + 1 or floor
            end = text.find("\n", mark.index, ceiling)
            where, value = f"line {mark.line + 1}", text[start:end if end >= 0 else ceiling].strip()
        else:
            where, value = "<file>", path.name
        problem = str(getattr(exc, "problem", None) or exc)
        context = getattr(exc, "context", None)
        if context and problem.startswith("but "):  # PyYAML splits "expected X, but found Y" across the two
            problem = f"{context}, {problem}"
        problem = " ".join(problem.split())
        prefix = "" if isinstance(exc, YamlRefused) else "invalid YAML: "
        raise ConfigError.single(source, where, value, f"{prefix}{problem}") from None


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


# Files in config/ that are not environments: pipeline.yaml configures the promotion pipeline (hpdpd.config.pipeline),
# global.yaml the global inference gateways (hpdpd.config.global_gateway).
RESERVED_NAMES = ("pipeline", "global")


def selected_environments() -> list[str] | None:
    """``HPDPD_ENVIRONMENTS=dev,staging`` -> ``["dev", "staging"]``; unset or empty -> None (every environment)."""
    value = os.environ.get("HPDPD_ENVIRONMENTS")
    if not value:
        return None
    return [name.strip() for name in value.split(",") if name.strip()] or None


# Environment names become stage ids and stack names (hpdpd-<env>-<part>): the CDK refuses a stage id outside
# /^[a-z][a-z0-9\-\_\.]*$/i (aws-cdk-lib 2.275.0 core/lib/stage.js, InvalidStageName) and a stack name outside
# /^[A-Za-z][A-Za-z0-9-]*$/ (core/lib/stack.js, VALID_STACK_NAME_REGEX); CloudFormation's stack names hold at most 128
# characters (AWS CloudFormation API Reference, CreateStack, StackName), and "-endpoints" is the longest part.
ENVIRONMENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
MAX_ENVIRONMENT_NAME = 128 - len("hpdpd--endpoints")


def environment_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an environment (its stage and stacks), or None."""
    if not ENVIRONMENT_NAME.fullmatch(name):
        return ("is not an environment name: the file name must start with a letter and hold only letters, digits "
                "and hyphens (it names the CDK stage and the stacks hpdpd-<env>-<part>)")
    if len(name) > MAX_ENVIRONMENT_NAME:
        return f"is longer than {MAX_ENVIRONMENT_NAME} characters (stack names hold at most 128)"
    return None


def list_environments(directory: Path | None = None) -> list[str]:
    """The environments of the directory: the stems of its ``*.yaml`` entries (files or not: loading says what an
    entry that is not a readable file is), ``pipeline.yaml`` excepted. A missing directory has none."""
    return sorted(p.stem for p in config_dir(directory).glob("*.yaml") if p.stem not in RESERVED_NAMES)


def _no_environment_file(name: str, directory: Path) -> str:
    available = ", ".join(list_environments(directory)) or "none"
    problem = directory_problem(directory)
    hint = f" ({display_path(directory)}: {problem}; pass --config-dir or set {CONFIG_DIR_VARIABLE})" if problem else ""
    return f"no such environment file; available environments: {available}{hint}"


def load_environment(name: str, directory: Path | None = None) -> EnvironmentConfig:
    """Load ``<config dir>/<name>.yaml``; every problem is a :class:`ConfigError` naming file, field and value."""
    directory = config_dir(directory)
    path = directory / f"{name}.yaml"
    source = display_path(path)
    if name in RESERVED_NAMES:
        available = ", ".join(list_environments(directory)) or "none"
        raise ConfigError.single(source, "<file>", name, "reserved for the promotion pipeline's settings, not an "
                                 f"environment; available environments: {available}")
    problem = environment_name_problem(name)
    if problem:
        raise ConfigError.single(source, "<file>", name, problem)
    if not present(path):  # a dangling or looping link, a directory: read_yaml says what is there
        raise ConfigError.single(source, "<file>", name, _no_environment_file(name, directory))
    return parse_environment(read_yaml(path), name=name, source=source, base_dir=directory.parent)


def load_all(directory: Path | None = None, names: list[str] | None = None) -> list[EnvironmentConfig]:
    """Load ``names`` (default: ``$HPDPD_ENVIRONMENTS``, else every environment of the directory); all of them are
    validated before anything is synthesized, each alone and then against every other environment of the directory
    (:func:`hyperpod_dpd.config.identity.check_identity`: no two claim one stack, cluster, bucket or role name).

    A directory that is missing, unreadable or holds no environment file is an error, not an empty selection:
    a mistyped ``--config-dir`` must not read as "nothing to check"."""
    directory = config_dir(directory)
    selected = names or selected_environments() or list_environments(directory)
    if not selected:
        raise ConfigError.single(display_path(directory), "<directory>", directory.name, _empty_directory(directory))
    loaded = [load_environment(n, directory) for n in selected]
    check_identity(loaded, _loadable((n for n in list_environments(directory) if n not in selected), directory))
    return loaded


def _loadable(names: Iterable[str], directory: Path) -> Iterator[EnvironmentConfig]:
    """The environments of ``names`` that load: one that does not is reported when it is selected itself, and its
    names cannot be trusted to compare with."""
    for name in names:
        try:
            yield load_environment(name, directory)
        except ConfigError:
            continue


def _empty_directory(directory: Path) -> str:
    problem = directory_problem(directory)
    if problem:
        return f"{problem}; pass --config-dir or set {CONFIG_DIR_VARIABLE} to the configuration directory"
    others = sorted(p.name for p in directory.glob("*.yml"))
    hint = f"; rename {', '.join(others)} to .yaml" if others else ""
    listed = "only pipeline.yaml, which is not an environment" if present(directory / "pipeline.yaml") else "none"
    return f"holds no environment file (<name>.yaml; found {listed}){hint}"
