"""``hpdpd cost --env``: the GPU pools of an environment per hour and per month, catalogue or overridden prices."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_dpd.catalogue.prices import HOURS_PER_MONTH, PRICES
from hyperpod_dpd.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dev_costs_two_p5_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN config/dev.yaml: one prefill and one decode ml.p5.48xlarge
    code, out, err = _run(capsys, "cost", "--env", "dev", "--output", "json")
    data = json.loads(out)
    hourly = PRICES["ml.p5.48xlarge"].usd_per_hour
    # THEN both GPU groups are priced (the system group is not) and the totals add up
    assert (code, err) == (0, "")
    assert [(g["name"], g["count"]) for g in data["groups"]] == [("prefill", 1), ("decode", 1)]
    assert data["total_usd_per_hour"] == pytest.approx(2 * hourly)
    assert data["total_usd_per_month"] == pytest.approx(2 * hourly * HOURS_PER_MONTH, abs=0.01)
    assert data["groups"][0]["price_as_of"] == "2025-06" and data["groups"][0]["price_source"]


def test_the_table_names_the_price_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "cost", "--env", "dev")
    assert code == 0 and "GPU pools of dev" in out and "$110.08" in out and "June 2025" in out


def test_an_environment_override_wins(capsys: pytest.CaptureFixture[str], write_config: Any,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def cheaper(data: dict[str, Any]) -> None:
        data["cost"] = {"prices": {"ml.p5.48xlarge": 40.0}}

    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(write_config(cheaper)))
    code, out, _ = _run(capsys, "cost", "--env", "dev", "--output", "json")
    data = json.loads(out)
    assert code == 0 and data["total_usd_per_hour"] == 80.0
    assert data["groups"][0]["price_basis"] == "environment override"


def test_a_bad_override_is_one_clear_line(capsys: pytest.CaptureFixture[str], write_config: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(data: dict[str, Any]) -> None:
        data["cost"] = {"prices": {"ml.p9.48xlarge": 40.0}}

    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(write_config(wrong)))
    code, out, err = _run(capsys, "cost", "--env", "dev")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "cost.prices.ml.p9.48xlarge: 40.0: unknown instance type" in err


def test_plan_with_env_uses_the_override(capsys: pytest.CaptureFixture[str], write_config: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def cheaper(data: dict[str, Any]) -> None:
        data["cost"] = {"prices": {"ml.p5.48xlarge": 40.0}}

    monkeypatch.setenv("HPDPD_CONFIG_DIR", str(write_config(cheaper)))
    code, out, _ = _run(capsys, "plan", "--model", "Llama-3.3-70B", "--env", "dev", "--input-tokens", "8192",
                        "--output-tokens", "512", "--concurrency", "16", "--output", "json")
    cost = json.loads(out)["cost"]
    assert code == 0 and cost["usd_per_instance_hour"] == 40.0 and cost["price_basis"] == "environment override"
