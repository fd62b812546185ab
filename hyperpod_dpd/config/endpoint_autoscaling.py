"""Autoscaling of one DPD role (``pdSpec.autoScalingSpec.prefillAutoScaling`` / ``decodingAutoScaling``), KEDA-backed.

Field names, defaults and bounds are the CRD's (``k8s/crds/``, ``InferenceEndpointConfig`` v1,
``spec.pdSpec.autoScalingSpec.*``): every count and period is ``format: int32, minimum: 0``; ``serverAddress`` has the
pattern :data:`~hyperpod_dpd.config.names.AmpUrl` repeats. What a trigger reads, and which role it may scale, is
checked over the whole endpoint in :mod:`hyperpod_dpd.config.endpoint_autoscaling_checks`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.names import AmpUrl

INT32_MAX = 2**31 - 1  # the CRD's "format: int32" of minReplicaCount, maxReplicaCount, pollingInterval, cooldownPeriod...


class CloudWatchTrigger(Model):
    metric_name: str = Field(min_length=1, max_length=255)  # CloudWatch: metric names and namespaces 1-255
    namespace: str = Field(min_length=1, max_length=255)
    target_value: float = Field(gt=0)
    dimensions: dict[str, str] = Field(default_factory=dict)
    statistic: str = "Average"  # CRD metricStat, default Average
    metric_type: Literal["Average", "Value"] = "Average"  # CRD metricType enum
    period_seconds: int | None = Field(default=None, ge=1, le=INT32_MAX)  # CRD metricCollectionPeriod (int32)
    activation_target_value: float | None = Field(default=None, ge=0)


class PrometheusTrigger(Model):
    query: str = Field(min_length=1)
    target_value: float = Field(gt=0)
    server_address: AmpUrl = ""  # CRD serverAddress: an AMP workspace URL or empty
    metric_type: Literal["Average", "Value"] = "Average"  # CRD metricType enum
    activation_target_value: float | None = Field(default=None, ge=0)

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a PromQL expression (KEDA sends it to the server as it is)")
        return value


class AutoScalingConfig(Model):
    """Independent autoscaling of one role (``pdSpec.autoScalingSpec``); exactly one trigger.

    ``cooldown_seconds`` (CRD ``cooldownPeriod``) and ``activation_target_value`` act only on a scale to or from 0
    (``min_replicas: 0``), as the CRD describes them; scale-down between 1 and ``max_replicas`` is paced by
    ``scale_down_stabilization_seconds`` (``scaleDownStabilizationTime``, CRD default 300)."""

    min_replicas: int = Field(default=1, ge=0, le=INT32_MAX)  # CRD minReplicaCount, default 1
    max_replicas: int = Field(ge=1, le=INT32_MAX)  # CRD maxReplicaCount (default 5): stated, never left to the CRD
    polling_interval_seconds: int | None = Field(default=None, ge=1, le=INT32_MAX)  # CRD pollingInterval, default 30
    cooldown_seconds: int | None = Field(default=None, ge=0, le=INT32_MAX)  # CRD cooldownPeriod, default 300
    scale_down_stabilization_seconds: int | None = Field(default=None, ge=0, le=INT32_MAX)  # default 300
    cloudwatch: CloudWatchTrigger | None = None
    prometheus: PrometheusTrigger | None = None

    @field_validator("max_replicas")
    @classmethod
    def _max_replicas(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_replicas")
        if low is not None and value < low:
            raise ValueError(f"must be at least min_replicas ({low})")
        return value

    @model_validator(mode="after")
    def _shape(self) -> AutoScalingConfig:
        if (self.cloudwatch is None) == (self.prometheus is None):
            raise ValueError("set exactly one trigger: 'cloudwatch' or 'prometheus'")
        return self

    @property
    def trigger_path(self) -> str:
        """``prometheus`` or ``cloudwatch``: the key of the trigger that is set."""
        return "prometheus" if self.prometheus is not None else "cloudwatch"
