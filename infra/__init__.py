"""Reusable AWS CDK constructs for a HyperPod-on-EKS platform sized for disaggregated prefill/decode.

Import the constructs from their modules, e.g. ``from infra.efa_network import EfaNetwork``.
"""
