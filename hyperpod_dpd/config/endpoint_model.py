"""The model of an endpoint (``endpoints[].model``): its served name and where its weights come from."""

from __future__ import annotations

from pydantic import Field, model_validator

from hyperpod_dpd.config.base import Model
from hyperpod_dpd.config.names import (
    BucketName,
    CommitSha,
    DomainName,
    FsxId,
    FsxMountName,
    HuggingFaceId,
    ModelName,
    RegionName,
    SecretKey,
    SubdomainName,
)

# --- model source ------------------------------------------------------------------------------------------------------

class S3Source(Model):
    """Weights under ``s3://<bucket>/<prefix>``; keep the bucket in the cluster's Region (cold loads are slow)."""

    bucket: BucketName
    prefix: str = ""
    region: RegionName


class FsxSource(Model):
    file_system_id: FsxId
    path: str = ""
    dns_name: DomainName | None = None
    mount_name: FsxMountName | None = None


class SecretKeyRef(Model):
    name: SubdomainName
    key: SecretKey


class HuggingFaceSource(Model):
    """A Hub model; the token Secret reaches only the init container (needs egress to *.huggingface.co)."""

    model_id: HuggingFaceId
    revision: CommitSha | None = None
    token_secret: SecretKeyRef | None = None


class ModelConfig(Model):
    name: ModelName
    version: str | None = None
    parameters_billion: float | None = Field(default=None, gt=0)
    s3: S3Source | None = None
    fsx: FsxSource | None = None
    huggingface: HuggingFaceSource | None = None
    prefetch: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        chosen = [k for k in ("s3", "fsx", "huggingface") if getattr(self, k) is not None]
        if len(chosen) != 1:
            found = f" (found {' and '.join(chosen)})" if chosen else ""
            raise ValueError(f"set exactly one model source: 's3', 'fsx' or 'huggingface'{found}")
        return self

    @property
    def source_type(self) -> str:
        return "s3" if self.s3 else "fsx" if self.fsx else "huggingface"
