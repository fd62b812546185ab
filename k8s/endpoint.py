"""DisaggregatedEndpoint: an ``InferenceEndpointConfig`` in DPD mode, built from a typed ``EndpointConfig``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import cdk8s
from constructs import Construct

from hyperpod_dpd.catalogue.kv_tiers import backend_refusal
from hyperpod_dpd.catalogue.operator import DEFAULT_OPERATOR, OPERATOR_RELEASES
from hyperpod_dpd.catalogue.zones import zone_kind
from hyperpod_dpd.config.endpoint_checks import operator_issues
from hyperpod_dpd.config.endpoint_kv_checks import kv_cache_of, kv_issues
from hyperpod_dpd.config.endpoint_pods import iec_extensions
from hyperpod_dpd.config.endpoints import DpdRole, EndpointConfig, managed_flag_issues
from hyperpod_dpd.errors import ConfigError, Issue
from hyperpod_dpd.k8s import defaults
from hyperpod_dpd.k8s.extensions import apply_extensions
from hyperpod_dpd.k8s.imports.com.amazon.aws.sagemaker import inference as iec
from hyperpod_dpd.k8s.overrides import apply_overrides, override_issues, rendered_at, typed_field, typed_message

ArgsTarget = Literal["worker", "prefill", "decode"]


class _InferenceEndpointConfig(iec.InferenceEndpointConfig):
    """The generated L1 whose spec is rendered at synthesis time.

    cdk8s-plus passes ``spec=Lazy.any(...)`` to its L1; from Python both the generated constructor and the jsii kernel
    check the spec's type eagerly and reject a ``Lazy``, so the spec is produced by overriding ``to_json`` instead.
    In that order: the spec, the fields of later operators (``extensions``: dotted path -> value,
    :mod:`hyperpod_dpd.k8s.extensions`), the typed overrides (``overrides``: JSON pointer -> value,
    :mod:`hyperpod_dpd.k8s.overrides`), then the JSON patches of :meth:`add_json_patch`, which are held here and applied
    to the whole manifest (cdk8s would apply them before the spec exists, where a ``/spec/...`` path fails).
    """

    def __init__(self, scope: Construct, id: str, *, metadata: cdk8s.ApiObjectMetadata,
                 render: Callable[[], iec.InferenceEndpointConfigSpec],
                 extensions: Callable[[], Mapping[str, Any]], overrides: Callable[[], Mapping[str, Any]]) -> None:
        super().__init__(scope, id, metadata=metadata)
        self._render = render
        self._extensions = extensions
        self._overrides = overrides
        self._patches: list[cdk8s.JsonPatch] = []

    def add_json_patch(self, *ops: cdk8s.JsonPatch) -> None:
        """Hold ``ops`` until the spec is rendered, so ``/spec/...`` paths work (the manifest is validated after)."""
        self._patches.extend(ops)

    def rendered_manifest(self) -> dict[str, Any]:
        """What the toolkit renders from the typed fields: the spec and the extension fields."""
        manifest = super().to_json()
        manifest["spec"] = iec.InferenceEndpointConfig.manifest(spec=self._render())["spec"]
        return apply_extensions(manifest, self._extensions())

    def spec_manifest(self) -> dict[str, Any]:
        """The manifest before the JSON patches: the rendered one with the overrides."""
        return apply_overrides(self.rendered_manifest(), self._overrides())

    def to_json(self) -> Any:
        manifest = self.spec_manifest()
        if not self._patches:
            return manifest
        try:
            return dict(cdk8s.JsonPatch.apply(manifest, *self._patches))
        except Exception as error:  # noqa: BLE001 - jsii raises its own error types from fast-json-patch
            raise ConfigError.single(f"InferenceEndpointConfig {self.name}", "add_json_patch", len(self._patches),
                                     f"a JSON patch does not apply to the rendered manifest ({error}); set spec fields "
                                     "with DisaggregatedEndpoint.add_override(path, value), which creates missing "
                                     "parents and checks the CRD schema") from None


class DisaggregatedEndpoint(Construct):
    """One DPD endpoint: an ``InferenceEndpointConfig`` with ``pdSpec``, which the operator turns into prefill and
    decode Deployments, a router and its Service (SageMaker HyperPod DPD documentation).

    What it adds over the raw CRD:

    * checks the CRD cannot express (DPD instance types, one decoder, tensor-parallel size, kvaware path, name
      lengths, one image, ``PYTHONHASHSEED``, what the image or operator release cannot run), raised as
      :class:`ConfigError` before anything joins the tree. The doubtful choices (``endpoint.warnings()``) are reported
      where the configuration is loaded and as CDK annotations (hyperpod_dpd.infra.config_warnings), not on every
      render, so each is shown once;
    * the three DPD environment variables, GPU (and CPU/memory) requests per role, per-role node selectors onto the
      HyperPod prefill and decode groups, same-AZ topology, ``/health`` load-balancer checks and the worker block;
    * the IEC name ``<name>-<generation>``: the generation hashes the fields the operator cannot change in place, so
      changing one renders a new IEC (see README, "Changing immutable fields"); with ``sagemaker_endpoint_name``
      its ``endpointName`` is ``<sagemaker_endpoint_name>-<generation>`` (SageMaker names are unique per account and
      Region, so two generations side by side need two; ``rollout.fixed_sagemaker_endpoint_name`` keeps one);
    * fields of later operators (tolerations, ``lmcache.mode``, pod template annotations), refused when
      ``operator_version`` predates them. Tolerations derived from the instance groups' taints come from
      :meth:`EndpointConfig.for_environment`; an endpoint built in Python renders only the tolerations it lists.

    The primary child ``Resource`` is the generated L1; its spec is produced at synthesis, so ``add_args`` after
    construction still lands in the manifest.
    """

    def __init__(self, scope: Construct, id: str, *, endpoint: EndpointConfig,
                 operator_version: str = DEFAULT_OPERATOR) -> None:
        if operator_version not in OPERATOR_RELEASES:
            problems = [Issue("operator_version", operator_version,
                              f"must be a known operator release: {', '.join(OPERATOR_RELEASES)}")]
        else:
            problems = [*endpoint.issues(None, ""),
                        *operator_issues(endpoint, operator_version, "", setting="operator_version"),
                        *kv_issues(endpoint, operator_version, None, "")]
        if problems:
            raise ConfigError(f"endpoint {endpoint.name}", problems)
        super().__init__(scope, id)
        self.endpoint = endpoint
        self.operator_version = operator_version
        self.name = endpoint.resource_name
        self.namespace = endpoint.namespace
        self._extra_args: dict[ArgsTarget, list[str]] = {"worker": [], "prefill": [], "decode": []}
        self._overrides: dict[str, Any] = {}
        self.resource = _InferenceEndpointConfig(
            self, "Resource",
            metadata=cdk8s.ApiObjectMetadata(
                name=self.name, namespace=self.namespace,
                labels={defaults.ENDPOINT_LABEL: endpoint.name, defaults.GENERATION_LABEL: endpoint.generation}),
            render=self._to_spec, extensions=self._extensions, overrides=lambda: dict(self._overrides))
        self.node.default_child = self.resource
        for path, value in endpoint.overrides.items():  # the configuration's overrides, checked like add_override's
            self.add_override(path, value, _field=f"overrides[{path!r}]")

    def add_args(self, target: ArgsTarget, *args: str) -> None:
        """Append vLLM args to both roles (``worker``) or to one role; a per-role flag overrides the shared one."""
        problems = list(managed_flag_issues(f"{target}.args", list(args)))
        if problems:
            raise ConfigError(f"endpoint {self.endpoint.name}", problems)
        self._extra_args[target].extend(args)

    def add_override(self, path: str, value: Any, *, _field: str | None = None) -> None:
        """Set an IEC field the toolkit does not model yet, by JSON pointer (``/spec/kvCacheSpec/enableL2Cache``).

        Applied after the spec renders (and before JSON patches); missing parent objects are created. A path the
        CRD schema does not declare, a value it refuses, or a field the toolkit renders from a typed field (set that
        field instead) raises :class:`ConfigError` here, as does an L2 backend
        the operator release does not honour (hyperpod_dpd.catalogue.kv_tiers). A later override of the same path wins.
        ``_field`` (``overrides['/spec/...']``) roots the issues of a configuration's override at its field.
        """
        where = _field or path
        typed = typed_field(path)
        problems = list(override_issues(path, value, _field)) if typed is None else []
        if not problems and (typed is not None or rendered_at(self.resource.rendered_manifest(), path)):
            problems = [Issue(where, value, typed_message(typed))]
        if not problems:
            candidate = {**self._overrides, path: value}
            try:
                spec = apply_overrides(self.resource.spec_manifest(), {path: value})["spec"]
            except ValueError as error:
                problems = [Issue(where, value, str(error))]
            else:
                backend = ((spec.get("kvCacheSpec") or {}).get("l2CacheSpec") or {}).get("l2CacheBackend")
                why = backend_refusal(backend, self.operator_version) if isinstance(backend, str) else None
                if why:
                    problems = [Issue(where, value, f"sets l2CacheBackend '{backend}', which {why}")]
                else:
                    self._overrides = candidate
        if problems:
            source = f"endpoint {self.endpoint.name}"
            raise ConfigError(source if _field else f"{source}: add_override", problems)

    # -- rendering ---------------------------------------------------------------------------------------------------

    def _to_spec(self) -> iec.InferenceEndpointConfigSpec:
        e = self.endpoint
        return iec.InferenceEndpointConfigSpec(
            model_name=e.model.name,
            model_version=e.model.version,
            instance_type=e.instance_type,
            invocation_endpoint=e.invocation_path,
            endpoint_name=e.rendered_sagemaker_endpoint_name,  # <name>-<generation>: generations side by side
            model_source_config=self._model_source(),
            worker=self._worker(),
            pd_spec=iec.InferenceEndpointConfigSpecPdSpec(
                prefill_spec=iec.InferenceEndpointConfigSpecPdSpecPrefillSpec(
                    replicas=e.prefill.replicas,
                    args=[*e.prefill.args, *self._extra_args["prefill"]] or None,
                    node_selector=e.node_selector("prefill"),
                    resources=iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResources(
                        requests=self._quantities(iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResourcesRequests),
                        limits=self._quantities(iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResourcesLimits))),
                decoding_spec=iec.InferenceEndpointConfigSpecPdSpecDecodingSpec(
                    replicas=e.decode.replicas,
                    args=[*e.decode.args, *self._extra_args["decode"]] or None,
                    node_selector=e.node_selector("decode"),
                    resources=iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResources(
                        requests=self._quantities(iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResourcesRequests),
                        limits=self._quantities(iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResourcesLimits))),
                routing_threshold=e.routing.threshold,
                topology_spec=iec.InferenceEndpointConfigSpecPdSpecTopologySpec(
                    same_az=True,
                    # The operator pins both roles to this zone *name* ("Force pods into a specific availability
                    # zone", the CRD); an AZ ID is left out rather than guessed: sameAZ keeps them in one zone, and
                    # every instance group runs in the GPU subnet, whose zone the ID fixed (docs/configuration.md).
                    availability_zone=e.topology.availability_zone if zone_kind(
                        e.topology.availability_zone or "") == "name" else None,
                    placement_group=e.topology.placement_group),
                auto_scaling_spec=self._autoscaling()),
            intelligent_routing_spec=iec.InferenceEndpointConfigSpecIntelligentRoutingSpec(
                enabled=True,
                routing_strategy=iec.InferenceEndpointConfigSpecIntelligentRoutingSpecRoutingStrategy[
                    e.routing.strategy.upper()]),
            kv_cache_spec=self._kv_cache(),
            load_balancer=iec.InferenceEndpointConfigSpecLoadBalancer(health_check_path=e.health_check_path),
            metrics=self._metrics(),
            tls_config=self._tls(),
            dns_config=iec.InferenceEndpointConfigSpecDnsConfig(hosted_zone_id=e.tls.hosted_zone_id)
            if e.tls and e.tls.hosted_zone_id else None,
        )

    def _kv_cache(self) -> iec.InferenceEndpointConfigSpecKvCacheSpec:
        """``kvCacheSpec``: L1 always stated; L2 only when ``kv_cache.l2`` is set (its backend was checked)."""
        kv = kv_cache_of(self.endpoint)
        if kv.l2 is None:
            return iec.InferenceEndpointConfigSpecKvCacheSpec(enable_l1_cache=kv.l1)
        return iec.InferenceEndpointConfigSpecKvCacheSpec(
            enable_l1_cache=kv.l1, enable_l2_cache=True,
            l2_cache_spec=iec.InferenceEndpointConfigSpecKvCacheSpecL2CacheSpec(
                l2_cache_backend=kv.l2.backend, l2_cache_local_url=kv.l2.url))

    def _extensions(self) -> dict[str, Any]:
        """Fields newer than the vendored CRD, by dotted path (the operator release was checked at construction)."""
        return {field.path: field.manifest for field in iec_extensions(self.endpoint)}

    def _model_source(self) -> iec.InferenceEndpointConfigSpecModelSourceConfig:
        model = self.endpoint.model
        source_type = iec.InferenceEndpointConfigSpecModelSourceConfigModelSourceType[model.source_type.upper()]
        prefetch = True if model.prefetch else None
        if model.s3:
            return iec.InferenceEndpointConfigSpecModelSourceConfig(
                model_source_type=source_type, model_location=model.s3.prefix or None, prefetch_enabled=prefetch,
                s3_storage=iec.InferenceEndpointConfigSpecModelSourceConfigS3Storage(
                    bucket_name=model.s3.bucket, region=model.s3.region))
        if model.fsx:
            return iec.InferenceEndpointConfigSpecModelSourceConfig(
                model_source_type=source_type, model_location=model.fsx.path or None, prefetch_enabled=prefetch,
                fsx_storage=iec.InferenceEndpointConfigSpecModelSourceConfigFsxStorage(
                    file_system_id=model.fsx.file_system_id, dns_name=model.fsx.dns_name,
                    mount_name=model.fsx.mount_name))
        hf = model.huggingface
        assert hf is not None  # noqa: S101 - ModelConfig guarantees exactly one source
        token = hf.token_secret
        return iec.InferenceEndpointConfigSpecModelSourceConfig(
            model_source_type=source_type, prefetch_enabled=prefetch,
            hugging_face_model=iec.InferenceEndpointConfigSpecModelSourceConfigHuggingFaceModel(
                model_id=hf.model_id, commit_sha=hf.revision,
                token_secret_ref=iec.InferenceEndpointConfigSpecModelSourceConfigHuggingFaceModelTokenSecretRef(
                    name=token.name, key=token.key) if token else None))

    def _worker_args(self) -> list[str]:
        e = self.endpoint
        args = ["--model", defaults.MODEL_MOUNT_PATH, "--host", defaults.LISTEN_ALL, "--port", str(defaults.MODEL_PORT),
                "--tensor-parallel-size", str(e.gpus_per_pod)]
        if e.max_model_len is not None:
            args += ["--max-model-len", str(e.max_model_len)]
        args += ["--gpu-memory-utilization", f"{e.gpu_memory_utilization:g}"]
        return [*args, *e.args, *self._extra_args["worker"]]

    def _worker(self) -> iec.InferenceEndpointConfigSpecWorker:
        e = self.endpoint
        return iec.InferenceEndpointConfigSpecWorker(
            image=e.worker_image,
            args=self._worker_args(),
            model_invocation_port=iec.InferenceEndpointConfigSpecWorkerModelInvocationPort(
                name=defaults.MODEL_PORT_NAME, container_port=defaults.MODEL_PORT),
            model_volume_mount=iec.InferenceEndpointConfigSpecWorkerModelVolumeMount(
                name=defaults.MODEL_VOLUME_NAME, mount_path=defaults.MODEL_MOUNT_PATH),
            # Required by the schema and documented as ignored for DPD pods; the per-role blocks repeat it (§20.2).
            resources=iec.InferenceEndpointConfigSpecWorkerResources(
                requests=self._quantities(iec.InferenceEndpointConfigSpecWorkerResourcesRequests),
                limits=self._quantities(iec.InferenceEndpointConfigSpecWorkerResourcesLimits)),
            environment_variables=[iec.InferenceEndpointConfigSpecWorkerEnvironmentVariables(name=k, value=v)
                                   for k, v in e.worker_environment.items()],
            request_limits=iec.InferenceEndpointConfigSpecWorkerRequestLimits(
                max_concurrent_requests=e.request_limits.max_concurrent_requests,
                max_queue_size=e.request_limits.max_queue_size,
                overflow_status_code=e.request_limits.overflow_status_code) if e.request_limits else None,
        )

    def pod_resources(self) -> dict[str, str]:
        """Requests (= limits) of one prefill or decode pod: its GPUs and the same share of the host's CPU and memory."""
        e = self.endpoint
        share = defaults.HOST_SHARE * e.gpus_per_pod / e.instance.gpu_count
        return {"cpu": str(int(e.instance.vcpus * share)), "memory": f"{int(e.instance.memory_gib * share)}Gi",
                defaults.GPU_RESOURCE: str(e.gpus_per_pod)}

    def _quantities(self, kind: Any) -> dict[str, Any]:
        return {name: kind.from_string(value) for name, value in self.pod_resources().items()}

    def _autoscaling(self) -> iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpec | None:
        e = self.endpoint
        if not (e.prefill.autoscaling or e.decode.autoscaling):
            return None
        return iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpec(
            prefill_auto_scaling=self._role_autoscaling("prefill"),
            decoding_auto_scaling=self._role_autoscaling("decode"))

    def _role_autoscaling(self, role: DpdRole) -> dict[str, Any] | None:
        """One role's KEDA settings as a struct dict (the generated prefill and decode classes differ only by name)."""
        scaling = self.endpoint.role(role).autoscaling
        if scaling is None:
            return None
        trigger_name = f"{self.name}-{role}"
        out: dict[str, Any] = {"min_replica_count": scaling.min_replicas, "max_replica_count": scaling.max_replicas}
        for key, value in (("polling_interval", scaling.polling_interval_seconds),
                           ("cooldown_period", scaling.cooldown_seconds),
                           ("scale_down_stabilization_time", scaling.scale_down_stabilization_seconds)):
            if value is not None:
                out[key] = value
        prefix = "PrefillAutoScaling" if role == "prefill" else "DecodingAutoScaling"
        cls = f"InferenceEndpointConfigSpecPdSpecAutoScalingSpec{prefix}"
        if scaling.cloudwatch:
            cw = scaling.cloudwatch
            out["cloud_watch_trigger"] = _drop_none({
                "name": trigger_name, "namespace": cw.namespace, "metric_name": cw.metric_name,
                "metric_stat": cw.statistic, "target_value": cw.target_value,
                "metric_type": getattr(iec, f"{cls}CloudWatchTriggerMetricType")[cw.metric_type.upper()],
                "metric_collection_period": cw.period_seconds, "activation_target_value": cw.activation_target_value,
                "dimensions": [{"name": k, "value": v} for k, v in sorted(cw.dimensions.items())] or None})
        if scaling.prometheus:
            prom = scaling.prometheus
            out["prometheus_trigger"] = _drop_none({
                "name": trigger_name, "query": prom.query, "target_value": prom.target_value,
                "server_address": prom.server_address or None,
                "metric_type": getattr(iec, f"{cls}PrometheusTriggerMetricType")[prom.metric_type.upper()],
                "activation_target_value": prom.activation_target_value})
        return out

    def _metrics(self) -> iec.InferenceEndpointConfigSpecMetrics:
        metrics = self.endpoint.metrics
        if not metrics.enabled:
            return iec.InferenceEndpointConfigSpecMetrics(enabled=False)
        # Router and cache metrics need the model-metrics port to be the invocation port (caching/routing page).
        return iec.InferenceEndpointConfigSpecMetrics(
            enabled=True, metrics_scrape_interval_seconds=metrics.scrape_interval_seconds,
            model_metrics=iec.InferenceEndpointConfigSpecMetricsModelMetrics(port=defaults.MODEL_PORT))

    def _tls(self) -> iec.InferenceEndpointConfigSpecTlsConfig | None:
        tls = self.endpoint.tls
        if tls is None:
            return None
        custom = iec.InferenceEndpointConfigSpecTlsConfigCustomCertificateConfig(
            acm_arn=tls.acm_certificate_arn, domain_name=tls.domain_name) if tls.acm_certificate_arn else None
        return iec.InferenceEndpointConfigSpecTlsConfig(
            tls_certificate_output_s3_uri=tls.certificate_output_s3_uri, custom_certificate_config=custom)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
