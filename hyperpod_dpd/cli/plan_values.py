"""The values ``hpdpd plan`` reads from its flags: each is checked here, and a bad one ends in one line naming the flag,
the value and what is allowed (argparse only collects strings)."""

from __future__ import annotations

import argparse
from typing import Any

from hyperpod_dpd.errors import MISSING, ConfigError


def fail(flag: str, value: Any, message: str) -> ConfigError:
    return ConfigError.single(None, flag, value, message)


def required(args: argparse.Namespace, attribute: str) -> str:
    value = getattr(args, attribute)
    if value is None or not str(value).strip():
        raise fail("--" + attribute.replace("_", "-"), MISSING if value is None else value, "is required")
    return str(value)


def positive_int(flag: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise fail(flag, value, "must be a whole number") from None
    if number < 1:
        raise fail(flag, value, "must be at least 1")
    return number


def count(flag: str, value: str | None) -> int | None:
    """A whole number of at least 0 (tokens), or None when the flag is absent."""
    if value is None:
        return None
    if value.strip().isdigit():
        return int(value)
    raise fail(flag, value, "must be a whole number of at least 0")


def fraction(flag: str, value: str | None) -> float:
    if value is None:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        raise fail(flag, value, "must be a number from 0 to 0.99") from None
    if not 0.0 <= number < 1.0:
        raise fail(flag, value, "must be at least 0 and below 1")
    return number


def milliseconds(flag: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise fail(flag, value, "must be a number of milliseconds") from None
    if not number > 0 or number == float("inf"):
        raise fail(flag, value, "must be a positive number of milliseconds")
    return number / 1e3


def choice(flag: str, value: str | None, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value.strip().lower() not in allowed:
        raise fail(flag, value, f"must be one of {', '.join(allowed)}")
    return value.strip().lower()
