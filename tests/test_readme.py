"""The documentation runs as written: every ```python block of README.md and docs/*.md, and every relative link.

Each block runs in a fresh namespace. What a block needs before it runs and what must hold afterwards is declared in
``EXAMPLES``, keyed by the document and the heading the block sits under; a block without an entry fails and says so.
A block that is not meant to run is fenced as something else (```text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Fences may be indented (inside list items); the code inside loses that indentation.
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(?P<title>.*?)(\s+#+)?\s*$")


# --- finding the blocks ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, the heading above it, and its code."""

    document: str  # relative to the repository, e.g. "docs/endpoints.md"
    index: int  # position among the document's python blocks
    marker: str  # the heading above it, with " (2)", " (3)" for further blocks under the same heading
    line: int  # line of the document where the code starts
    code: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.document, self.marker)

    @property
    def id(self) -> str:
        return f"{self.document}:{self.index}:{self.marker}"


@dataclass(frozen=True)
class Fenced:
    """A fenced code block: its info string, the heading above it, the line its code starts on, and the code."""

    info: str
    heading: str
    line: int
    code: str


def scan(text: str, source: str = "<text>") -> tuple[list[Fenced], list[str]]:
    """The fenced code blocks of a Markdown text, and the lines outside them (where headings and links live)."""
    fenced: list[Fenced] = []
    outside: list[str] = []
    heading, opened, body, start = "", None, [], 0
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if opened is None:
            if fence and not (fence["fence"][0] == "`" and "`" in fence["info"]):
                opened, body, start = fence, [], number + 1
                continue
            if title := HEADING.match(line):
                heading = title["title"]
            outside.append(line)
            continue
        closes = (fence and fence["fence"][0] == opened["fence"][0] and len(fence["fence"]) >= len(opened["fence"])
                  and not fence["info"].strip())
        if closes:
            fenced.append(Fenced(opened["info"].strip(), heading, start, "\n".join(body) + "\n"))
            opened = None
        else:
            indent = opened["indent"]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
    assert opened is None, f"{source}: the code fence opened on line {start - 1} is never closed"
    return fenced, outside


def python_blocks(text: str, document: str) -> list[Block]:
    """The fenced blocks whose info string starts with ``python``, with the nearest heading above each one."""
    blocks: list[Block] = []
    per_heading: dict[str, int] = {}
    for block in scan(text, document)[0]:
        if block.info.split()[:1] != ["python"]:
            continue
        seen = per_heading[block.heading] = per_heading.get(block.heading, 0) + 1
        marker = block.heading if seen == 1 else f"{block.heading} ({seen})"
        blocks.append(Block(document, len(blocks), marker, block.line, block.code))
    return blocks


BLOCKS = [b for path in DOCUMENTS for b in python_blocks(path.read_text(), path.relative_to(ROOT).as_posix())]


# --- what each block needs and what must hold afterwards ----------------------------------------------------------------

@dataclass(frozen=True)
class Context:
    tmp_path: Path
    cdk_context: dict[str, Any]


def _no_names(ctx: Context) -> dict[str, Any]:
    return {}


def _as_written(code: str, ctx: Context) -> str:
    return code


@dataclass(frozen=True)
class Example:
    """``given`` builds the namespace the block runs in, ``rewrite`` adapts its code to the test (each replacement
    must find its text), and ``then`` asserts on what the block produced."""

    then: Callable[[dict[str, Any], Context], None]
    given: Callable[[Context], dict[str, Any]] = _no_names
    rewrite: Callable[[str, Context], str] = _as_written


def _replace(code: str, old: str, new: str) -> str:
    assert code.count(old) == 1, f"the block no longer contains {old!r} exactly once"
    return code.replace(old, new)


# docs/library.md: the constructs in another CDK app.

def _an_app(ctx: Context) -> dict[str, Any]:
    """The app the snippet expects: another team's, with the CDK's validation on but none of this repository's service
    feature flags (the context of examples/consumer/cdk.json)."""
    import json

    import aws_cdk as cdk

    context = json.loads((ROOT / "examples" / "consumer" / "cdk.json").read_text())["context"]
    return {"app": cdk.App(outdir=str(ctx.tmp_path), context=context)}


def _serving_stack_synthesizes(namespace: dict[str, Any], ctx: Context) -> None:
    assembly = namespace["app"].synth()
    # Nothing is left for the CDK CLI to look up in AWS: `cdk synth` of the snippet needs no credentials.
    import json

    manifest = json.loads((Path(assembly.directory) / "manifest.json").read_text())
    assert "missing" not in manifest, manifest["missing"]
    # The stack holds the network, EKS, HyperPod and the inference add-on.
    template = assembly.get_stack_by_name("Serving").template
    types = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::EC2::VPC", "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::EKS::Addon"} <= types
    assert namespace["operator"].addon_version == "v1.5.0-eksbuild.1"


# docs/endpoints.md: an endpoint declared in Python.

def _charts_into_tmp_path(code: str, ctx: Context) -> str:
    # The snippet's cdk8s.App() writes to dist/ of the jsii process's directory; point it at tmp_path instead.
    return _replace(code, "app = cdk8s.App()", f"app = cdk8s.App(outdir={str(ctx.tmp_path)!r})")


def _charts_written(namespace: dict[str, Any], ctx: Context) -> None:
    # One chart per endpoint: the fixture staging environment declares none, the snippet adds two.
    written = sorted(p.name for p in ctx.tmp_path.glob("*.k8s.yaml"))
    assert written == ["llama-long-context.k8s.yaml", "llama.k8s.yaml"]


# docs/security.md: acknowledging findings on one construct each.

def _constructs_to_acknowledge(ctx: Context) -> dict[str, Any]:
    """The constructs the snippet names: a role with a managed policy, a wildcard policy, a HyperPod cluster, a bucket."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    app = cdk.App(outdir=str(ctx.tmp_path), context=ctx.cdk_context)
    stack = cdk.Stack(app, "Acknowledged", env=cdk.Environment(account="111111111111", region="us-west-2"))
    role = iam.Role(stack, "ClusterRole", assumed_by=iam.ServicePrincipal("eks.amazonaws.com"),
                    managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEKSClusterPolicy")])
    statements = [iam.PolicyStatement(sid="DescribeNetworking", actions=["ec2:Describe*"], resources=["*"])]
    return {
        "role": role,
        "policy": iam.Policy(stack, "Networking", statements=statements, roles=[role]),
        "statements": statements,
        "cluster_resource": cdk.CfnResource(stack, "Cluster", type="AWS::SageMaker::Cluster"),
        "bucket": s3.Bucket(stack, "Bucket"),
    }


def _acknowledged(construct: Any) -> dict[str, str]:
    """The acknowledgments the CDK's validation framework recorded on ``construct``: finding id -> reason."""
    return {k: v for m in construct.node.metadata if "acknowledged" in m.type for k, v in m.data.items()}


def _acknowledgments_recorded(namespace: dict[str, Any], ctx: Context) -> None:
    import aws_cdk as cdk

    role, policy, cluster, bucket = (namespace[n] for n in ("role", "policy", "cluster_resource", "bucket"))
    acknowledged = {**_acknowledged(role), **_acknowledged(policy), **_acknowledged(cluster)}
    # Each finding is acknowledged on its one construct, by its exact id, with a reason.
    assert set(_acknowledged(role)) == {
        "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]"}
    assert set(_acknowledged(policy)) == {
        "AwsSolutions::AwsSolutions-IAM5[Action::ec2:Describe*]", "AwsSolutions::AwsSolutions-IAM5[Resource::*]"}
    assert set(_acknowledged(cluster)) == {"HyperPodDpd::HPDPD-HP1"}
    assert all(reason.strip() for reason in acknowledged.values())
    # The checkov skip lands in the bucket's CloudFormation Metadata, with its reason.
    stack = cdk.Stack.of(bucket)
    template = stack.node.root.synth().get_stack_by_name(stack.stack_name).template
    skips = template["Resources"][stack.get_logical_id(bucket.node.default_child)]["Metadata"]["checkov"]["skip"]
    assert [s["id"] for s in skips] == ["CKV_AWS_21"] and skips[0]["comment"].strip()


EXAMPLES: dict[tuple[str, str], Example] = {
    ("docs/library.md", "Building blocks"):
        Example(given=_an_app, then=_serving_stack_synthesizes),
    ("docs/endpoints.md", "Declaring an endpoint in Python"):
        Example(rewrite=_charts_into_tmp_path, then=_charts_written),
    ("docs/security.md", "Acknowledging a finding properly"):
        Example(given=_constructs_to_acknowledge, then=_acknowledgments_recorded),
}


# Blocks that are files of examples/consumer, shown verbatim. They run where users run them: installed from a wheel
# into a fresh venv, by tests/test_consumer_example.py (in-process, the repository's own infra/ and stacks/ folders
# would shadow the example's packages).
COPIES: dict[tuple[str, str], Path] = {
    ("README.md", "Using it from another CDK app"): ROOT / "examples" / "consumer" / "app.py",
    ("docs/library.md", "One construct"): ROOT / "examples" / "consumer" / "app.py",
    ("docs/library.md", "One construct (2)"): ROOT / "examples" / "consumer" / "stacks" / "serving.py",
}
RUN = [b for b in BLOCKS if b.key not in COPIES]


# --- the tests ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block", [b for b in BLOCKS if b.key in COPIES], ids=lambda b: b.id)
def test_library_block_is_the_consumer_example_verbatim(block: Block) -> None:
    assert block.code == COPIES[block.key].read_text(), f"{block.id} differs from {COPIES[block.key]}"


def test_every_copy_entry_has_its_block() -> None:
    assert set(COPIES) <= {b.key for b in BLOCKS}


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_python_block_runs(block: Block, tmp_path: Path, cdk_context: dict[str, Any]) -> None:
    # GIVEN the block and what its entry says it needs
    example = EXAMPLES.get(block.key)
    assert example is not None, (
        f"{block.document}, line {block.line}: no entry in EXAMPLES for the python block under {block.marker!r}; "
        "add what it needs and what must hold afterwards, or fence it as ```text if it is not meant to run")
    ctx = Context(tmp_path, cdk_context)
    namespace = example.given(ctx)
    # WHEN it runs (tracebacks name the document and its line)
    code = "\n" * (block.line - 1) + example.rewrite(block.code, ctx)
    exec(compile(code, str(ROOT / block.document), "exec"), namespace)
    # THEN what it produced is what the documentation says
    example.then(namespace, ctx)


def test_every_example_entry_has_its_block() -> None:
    stale = set(EXAMPLES) - {b.key for b in BLOCKS}
    assert not stale, f"EXAMPLES entries without a python block (heading renamed or block moved?): {sorted(stale)}"


def test_blocks_are_found_by_heading_and_fence() -> None:
    text = "\n".join([
        "# Title", "```python", "a = 1", "```",
        "## Other `code`", "````text", "```python", "not = 'a block'", "```", "````",
        "1. step", "   ```python", "   b = 2", "   ```", "```python", "c = 3", "```",
        "```bash", "# not a heading", "```", "~~~python", "d = 4", "~~~",
    ])
    blocks = python_blocks(text, "doc.md")
    assert [(b.marker, b.line, b.code) for b in blocks] == [
        ("Title", 3, "a = 1\n"),
        ("Other `code`", 13, "b = 2\n"),
        ("Other `code` (2)", 16, "c = 3\n"),
        ("Other `code` (3)", 22, "d = 4\n"),
    ]


# --- links -------------------------------------------------------------------------------------------------------------

INLINE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?P<target>\S+)", re.M)
CODE_SPAN = re.compile(r"(?P<ticks>`+)(?!`).*?(?<!`)(?P=ticks)(?!`)", re.S)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose(text: str) -> str:
    """The text outside fenced code blocks and code spans, where Markdown links live."""
    return CODE_SPAN.sub("", "\n".join(scan(text)[1]))


def relative_links(text: str) -> list[str]:
    outside_code = prose(text)
    found = (*INLINE_LINK.finditer(outside_code), *REFERENCE_LINK.finditer(outside_code))
    targets = [m["target"].strip("<>") for m in found]
    return [t for t in targets if not SCHEME.match(t)]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_at_existing_files_without_anchors(path: Path) -> None:
    links = relative_links(path.read_text())
    name = path.relative_to(ROOT).as_posix()
    anchored = [link for link in links if "#" in link]
    assert not anchored, f"{name}: links must point at a file, not at a heading (headings change): {anchored}"
    missing = [link for link in links if not (path.parent / link).exists()]
    assert not missing, f"{name}: links to files that do not exist: {missing}"


def test_links_are_found_outside_code_only() -> None:
    text = "\n".join([
        "See [the docs](docs/a.md) and [b](<docs/b c.md> \"title\"), [web](https://example.com/x#y).",
        "`[not](a-link.md)` and", "```text", "[nor](this.md)", "```", "[ref]: docs/c.md",
    ])
    assert relative_links(text) == ["docs/a.md", "docs/b c.md", "docs/c.md"]
