"""The HyperPod Inference Operator's Kubernetes API: the group, version, kind and plural of its InferenceEndpointConfig.

Both wings read these: the CDK wing grants RBAC on the resource (``hyperpod_dpd.infra.operations_access``) and the
live-cluster client reads, creates and deletes it (``hyperpod_dpd.ops.kube``, ``hyperpod_dpd.ops.workloads``), so they
live here, on the ground both stand on, not in either wing.

Source: the operator's CustomResourceDefinition, vendored as
``k8s/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml`` from aws/sagemaker-hyperpod-cli
``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/`` at ``0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b``
(chart 2.3.0, operator 3.3; ``k8s/crds/SOURCES.md``): ``spec.group``, ``spec.names.kind``, ``spec.names.plural`` and
the version that is ``served`` and ``storage`` (``v1``; ``v1alpha1`` is served but not stored, converted by the
operator's webhook). tests/hyperpod_dpd/catalogue/test_operator_api.py reads them back from that file.
"""

from __future__ import annotations

IEC_GROUP = "inference.sagemaker.aws.amazon.com"  # spec.group
IEC_VERSION = "v1"  # spec.versions[name=v1]: served: true, storage: true
IEC_KIND = "InferenceEndpointConfig"  # spec.names.kind
IEC_PLURAL = "inferenceendpointconfigs"  # spec.names.plural
IEC_API_VERSION = f"{IEC_GROUP}/{IEC_VERSION}"  # what a manifest's apiVersion says
IEC_RESOURCE = f"{IEC_PLURAL}.{IEC_GROUP}"  # the CRD's metadata.name, and how RBAC messages name the resource
