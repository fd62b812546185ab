"""Shared set-up of the command tests: moto with fake credentials, nothing from the machine's AWS set-up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from hyperpod_dpd.aws import ClientFactory
from tests.hyperpod_dpd.moto_clusters import MOTO_ACCOUNT  # noqa: F401 - re-exported for the command tests


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Fake credentials and moto; nothing from the machine's AWS set-up leaks in."""
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        yield


@pytest.fixture
def moto_factory(monkeypatch: pytest.MonkeyPatch, aws: None) -> Callable[[ModuleType], ClientFactory]:
    """Route a command module's AWS clients to moto: ``clients = moto_factory(status_cli)``."""
    def route(module: ModuleType) -> ClientFactory:
        clients = ClientFactory(region="us-west-2")
        monkeypatch.setattr(module, "factory_from_args", lambda args, default_region, **_: clients)
        return clients
    return route
