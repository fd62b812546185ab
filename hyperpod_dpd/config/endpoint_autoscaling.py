"""Autoscaling of one DPD role (``pdSpec.autoScalingSpec.prefillAutoScaling`` / ``decodingAutoScaling``), KEDA-backed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.names import AmpUrl


class CloudWatchTrigger(Model):
    metric_name: str = Field(min_length=1, max_length=255)  # CloudWatch: metric names and namespaces 1-255
    namespace: str = Field(min_length=1, max_length=255)
    target_value: float = Field(gt=0)
    dimensions: dict[str, str] = Field(default_factory=dict)
    statistic: str = "Average"
    metric_type: Literal["Average", "Value"] = "Average"
    period_seconds: int | None = Field(default=None, ge=1)
    activation_target_value: float | None = Field(default=None, ge=0)


class PrometheusTrigger(Model):
    query: str = Field(min_length=1)
    target_value: float = Field(gt=0)
    server_address: AmpUrl = ""
    metric_type: Literal["Average", "Value"] = "Average"
    activation_target_value: float | None = Field(default=None, ge=0)


class AutoScalingConfig(Model):
    """Independent autoscaling of one role (``pdSpec.autoScalingSpec``); exactly one trigger."""

    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(ge=1)
    polling_interval_seconds: int | None = Field(default=None, ge=1)
    cooldown_seconds: int | None = Field(default=None, ge=0)
    scale_down_stabilization_seconds: int | None = Field(default=None, ge=0)
    cloudwatch: CloudWatchTrigger | None = None
    prometheus: PrometheusTrigger | None = None

    @model_validator(mode="after")
    def _shape(self) -> AutoScalingConfig:
        if (self.cloudwatch is None) == (self.prometheus is None):
            raise ValueError("set exactly one trigger: 'cloudwatch' or 'prometheus'")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) must not exceed max_replicas ({self.max_replicas})")
        return self
