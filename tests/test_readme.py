"""The README's Python examples run as written: the constructs from another CDK app, and an endpoint in Python."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def python_block(after_heading: str) -> str:
    """The first ```python block after a heading of the README."""
    start = README.index(after_heading)
    match = re.search(r"```python\n(.*?)```", README[start:], re.S)
    assert match, f"no python block after {after_heading!r}"
    return match.group(1)


def test_constructs_example_synthesizes(tmp_path: Path, cdk_context: dict[str, Any]) -> None:
    import aws_cdk as cdk

    # GIVEN the README's snippet, with the app it expects
    app = cdk.App(outdir=str(tmp_path), context=cdk_context)
    namespace: dict[str, Any] = {"app": app}
    # WHEN it runs and the app synthesizes (with the CDK's validation on)
    exec(python_block("## Using the constructs from another CDK app"), namespace)  # noqa: S102
    assembly = app.synth()
    # THEN the stack holds the network, EKS, HyperPod and the inference add-on
    template = assembly.get_stack_by_name("Serving").template
    types = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::EC2::VPC", "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::EKS::Addon"} <= types
    assert namespace["operator"].addon_version == "v1.5.0-eksbuild.1"


def test_endpoint_in_python_example_renders_valid_charts(tmp_path: Path) -> None:
    # The snippet's cdk8s.App() writes to dist/ of the jsii process's directory; point it at tmp_path instead.
    code = python_block("### Declaring an endpoint in Python")
    assert "app = cdk8s.App()" in code
    code = code.replace("app = cdk8s.App()", f"app = cdk8s.App(outdir={str(tmp_path)!r})")
    exec(code, {})  # noqa: S102
    written = sorted(p.name for p in tmp_path.glob("*.k8s.yaml"))
    assert written == ["llama-long-context.k8s.yaml", "llama.k8s.yaml"]
