"""hyperpod-dpd core: catalogue, typed environment configuration and operations tooling.

This package imports no CDK or cdk8s code, so the CLI starts fast and the
constructs in ``infra`` and ``k8s`` can depend on it without cycles.
"""

__version__ = "0.1.0"
