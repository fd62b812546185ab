"""hyperpod-dpd as a library, installed the way users install it: a wheel of the project in a fresh virtual
environment (no editable install, no repository on the path), used by ``examples/consumer``, an app with its own
``stacks/`` and ``infra/`` packages.

The wheel is built on every run. The venv it is installed into is kept in ``.cache/`` under a key of everything the
install is a function of: the wheel's contents (every member's name, mode and bytes), ``constraints.txt`` and
``requirements-lock.txt``, the Python and pip that install it and the platform. A warm run with an unchanged wheel
reuses that venv (an identical install); any change of the package makes a new one (``HPDPD_TEST_CACHE=off``: a fresh
venv every run). pip's cache and the pinned ``constraints.txt`` keep a new one to seconds, and ``--no-compile`` skips
byte-compiling aws-cdk-lib's generated code.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import cache
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "consumer"
NODE_BIN = ROOT / "node_modules" / "node" / "bin"


@dataclass
class Installed:
    venv: Path
    app_dir: Path
    env: dict[str, str]
    wheel: Path

    def run(self, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.app_dir, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("consumer")
    wheels = base / "wheels"
    # GIVEN a wheel of the project (built offline with the pinned setuptools; setuptools packages whatever its build/
    # directory holds, so a stale one from an earlier build could carry modules the tree no longer has) ...
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(wheels), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("hyperpod_dpd-*.whl"))
    # ... installed into a venv with nothing but what the wheel declares (exact versions from constraints.txt): a
    # fresh one, or the one kept from a run that installed this very wheel the same way
    venv = _venv_with(wheel, base)
    # ... and the example app copied away from the repository
    app_dir = base / "app"
    shutil.copytree(EXAMPLE, app_dir)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HPDPD_", "PYTHON", "CDK_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), str(NODE_BIN), env.get("PATH", "")])
    return Installed(venv, app_dir, env, wheel)


VENV_CACHE = cache.CACHE_ROOT / "consumer-venv"
INSTALL_INPUTS = (ROOT / "constraints.txt", ROOT / "requirements-lock.txt")


def _install(wheel: Path, venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "--no-compile", "--disable-pip-version-check", str(wheel), "-c", str(ROOT / "constraints.txt")],
                   check=True, capture_output=True, timeout=900)


def _install_key(wheel: Path) -> str:
    """Everything the install is a function of: what the wheel holds (not its zip timestamps), the pins, the Python and
    pip that install it, the platform."""
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split(" from ")[0]
    with zipfile.ZipFile(wheel) as archive:
        members = [part for info in sorted(archive.infolist(), key=lambda i: i.filename)
                   for part in (info.filename, str(info.external_attr), archive.read(info))]
    return cache.key(wheel.name, *members, *cache.files_key(INSTALL_INPUTS), sys.version, os.path.realpath(
        sys.executable), pip, platform.platform())


def _venv_with(wheel: Path, base: Path) -> Path:
    """A venv with the wheel installed: kept under the install's key in .cache/ (one at a time: a new key replaces
    the old venv), made fresh in ``base`` when caching is off. The venv stays where it was made (its scripts name
    its path), so a kept one is complete once its ``installed`` file holds the key."""
    if not cache.enabled():
        _install(wheel, base / "venv")
        return base / "venv"
    key = _install_key(wheel)
    venv = VENV_CACHE / key[:32]
    with cache.locked(VENV_CACHE / ".lock"):
        done = venv / "installed"
        if not (done.is_file() and done.read_text() == key):
            for stale in VENV_CACHE.iterdir():
                if stale.is_dir():
                    shutil.rmtree(stale)
            _install(wheel, venv)
            done.write_text(key)
    return venv


def test_the_installed_package_is_the_wheel_and_imports_without_dev_tools(installed: Installed) -> None:
    # WHEN every module of the distribution is imported in the fresh venv
    script = ("import importlib, pkgutil, hyperpod_dpd\n"
              "names = [m.name for m in pkgutil.walk_packages(hyperpod_dpd.__path__, 'hyperpod_dpd.')]\n"
              "for name in names: importlib.import_module(name)\n"
              "print(hyperpod_dpd.__file__); print(len(names))")
    done = installed.run(installed.python, "-c", script)
    # THEN all import (no runtime import needs pytest, cfn-lint or another dev-only package) from the venv's
    # site-packages, not from the checkout (the venv may be kept under the checkout's .cache/: tests/cache.py)
    assert done.returncode == 0, done.stderr[-3000:]
    location, count = done.stdout.split()
    site = next(installed.venv.glob("lib/python*/site-packages"))
    assert "site-packages" in location and Path(location) == site / "hyperpod_dpd" / "__init__.py"
    assert not Path(location).is_relative_to(ROOT / "hyperpod_dpd") and str(ROOT / "hyperpod_dpd") not in location
    assert int(count) > 60
    assert (Path(location).parent / "py.typed").is_file()
    # AND the dev-only tools are really absent there
    assert installed.run(installed.python, "-c", "import cfnlint").returncode != 0


def package_files() -> set[str]:
    """Every file of the package as the checkout holds it: ``hyperpod_dpd/`` with the ``infra/``, ``k8s/`` and
    ``stacks/`` folders linked inside it, followed as setuptools follows them."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(ROOT / "hyperpod_dpd", followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.update(str((Path(folder) / f).relative_to(ROOT)) for f in files)
    return found


def test_the_wheel_holds_exactly_the_package_tree(installed: Installed) -> None:
    import zipfile

    # GIVEN the wheel built from the checkout
    with zipfile.ZipFile(installed.wheel) as wheel:
        packaged = {n for n in wheel.namelist() if ".dist-info/" not in n}
    # THEN it holds every file of the package folder and its linked folders, and nothing else: the import path is the
    # path on disk, so what a checkout imports is what users install
    assert packaged == package_files()
    assert {"hyperpod_dpd/infra/platform.py", "hyperpod_dpd/stacks/application.py", "hyperpod_dpd/k8s/charts.py",
            "hyperpod_dpd/infra/handlers/chart_digest/index.py", "hyperpod_dpd/py.typed"} <= packaged


def test_a_checkout_imports_the_package_without_installing_it(tmp_path: Path) -> None:
    # GIVEN a Python without the project's editable install (its import hook and path entries dropped) and the
    # repository root on the path, as `python -c` run in the root has it
    script = ("import sys\n"
              "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
              f"sys.path[:] = [{str(ROOT)!r}] + [p for p in sys.path if 'editable' not in p]\n"
              "import hyperpod_dpd.infra, hyperpod_dpd.stacks, hyperpod_dpd.k8s\n"
              "print(hyperpod_dpd.infra.__file__)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    # THEN the linked folders are the package's subpackages, straight from the checkout
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(ROOT / "hyperpod_dpd" / "infra" / "__init__.py")


@pytest.fixture(scope="module")
def synthesized_example(installed: Installed) -> Path:
    outdir = installed.app_dir / "cdk.out"
    # WHEN the example app runs as `cdk synth` runs it (the context of its cdk.json, its own stacks/ and infra/
    # packages on the path, ./config), in an app whose feature flags are not the project's
    context = json.loads((installed.app_dir / "cdk.json").read_text())["context"]
    done = subprocess.run([installed.python, "app.py"], cwd=installed.app_dir,
                          env={**installed.env, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(context)},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return outdir


def test_example_app_with_its_own_stacks_and_infra_synthesizes(synthesized_example: Path) -> None:
    template = json.loads((synthesized_example / "Serving.template.json").read_text())
    types = {r["Type"] for r in template["Resources"].values()}
    # THEN the platform and the consumer's own construct share the stack
    assert {"AWS::EC2::VPC", "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::EKS::Addon",
            "Custom::AWSCDK-EKS-KubernetesResource", "AWS::SNS::Topic"} <= types
    # AND the consumer's on-call topic is encrypted with a key of its own, which CloudWatch alarms may use (the
    # AWS-managed alias/aws/sns key's policy cannot grant them)
    topic = next(r for k, r in template["Resources"].items() if r["Type"] == "AWS::SNS::Topic" and "OnCall" in k)
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = template["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    grants = [st for st in key["Properties"]["KeyPolicy"]["Statement"] if st.get("Sid") == "AllowCloudWatchAlarms"]
    assert grants[0]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert "aws:SourceAccount" in grants[0]["Condition"]["StringEquals"]


def test_example_synthesis_has_guardrail_reports_and_no_errors(synthesized_example: Path) -> None:
    report = json.loads((synthesized_example / "validation-report.json").read_text())
    # THEN the guardrails ran (non-empty plugin reports) and found nothing unacknowledged
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPodDpd"}
    violations = [v for p in report["pluginReports"] for v in p["violations"]]
    # but the configuration's own warnings, which are annotations and so warning-level entries of the report
    # (acknowledgeable: test_example_synthesis_shows_the_toolkits_warnings_as_annotations)
    assert [v for v in violations if not v["ruleName"].startswith("Annotation::hpdpd:config:")] == []
    assert {v["severity"] for v in violations} <= {"warning"}
    # AND no stack carries an error annotation
    manifest = json.loads((synthesized_example / "manifest.json").read_text())
    errors = [entry for artifact in manifest["artifacts"].values()
              for entries in artifact.get("metadata", {}).values() for entry in entries
              if entry.get("type") == "aws:cdk:error"]
    assert errors == []
    assert "missing" not in manifest


def test_example_synthesis_shows_the_toolkits_warnings_as_annotations(synthesized_example: Path) -> None:
    # GIVEN the example's configuration, whose environment warns (no container log group for the buffer-overflow
    # alarm, nobody subscribed to the alerts: warnings outside production)
    manifest = json.loads((synthesized_example / "manifest.json").read_text())
    artifact = manifest["artifacts"]["Serving"]
    entries = dict(artifact.get("metadata", {}))
    if "additionalMetadataFile" in artifact:  # where this aws-cdk-lib writes a stack's metadata
        entries.update(json.loads((synthesized_example / artifact["additionalMetadataFile"]).read_text()))
    # THEN the consumer's `cdk synth` shows it: a warning annotation on the platform construct, with the file, the field
    # and the id that acknowledges it
    warnings = [(path, entry["data"]) for path, items in entries.items() for entry in items
                if entry["type"] == "aws:cdk:warning" and "[ack: hpdpd:config:" in entry["data"]]
    assert [path for path, _ in warnings] == ["/Serving/Dpd", "/Serving/Dpd"], warnings
    logging, subscribers = (data for _, data in warnings)
    assert logging.startswith("config/ml-dev.yaml: operator.observability.logging: false: "), logging
    assert logging.endswith(" [ack: hpdpd:config:operator.observability.logging]"), logging
    assert subscribers.startswith("config/ml-dev.yaml: alerts.emails: []: nobody receives the alerts"), subscribers
    assert subscribers.endswith(" [ack: hpdpd:config:alerts.emails]"), subscribers


def test_example_grants_its_own_role_read_of_the_model_bucket_and_acknowledges_nothing(
        synthesized_example: Path) -> None:
    from aws_cdk.assertions import Capture, Match, Template

    template = Template.from_json(json.loads((synthesized_example / "Serving.template.json").read_text()))
    bucket = Capture()
    # THEN the consumer's batch job role may read the platform's model bucket (grant_model_read: the bucket's own
    # grant_read) ...
    template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": Match.string_like_regexp("^BatchJobRole")}],
        "PolicyDocument": {"Statement": [{"Action": ["s3:GetObject*", "s3:GetBucket*", "s3:List*"], "Effect": "Allow",
                                          "Resource": [{"Fn::GetAtt": [bucket, "Arn"]},
                                                       {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, "/*"]]}]}]}})
    template.has_resource_properties("AWS::S3::Bucket", {"BucketName": "ml-models-123456789012-us-west-2"})
    assert template.to_json()["Resources"][bucket.as_string()]["Properties"]["BucketName"] == \
        "ml-models-123456789012-us-west-2"
    # ... the synthesis passed cdk-nag (test_example_synthesis_has_guardrail_reports_and_no_errors), and the example's
    # own code acknowledges nothing: no finding id, no logical id of the platform
    sources = "".join(p.read_text() for p in EXAMPLE.rglob("*.py"))
    for call in ("Validations.of", "Acknowledgment(", "acknowledge(", "acknowledge_warning(", "NagSuppressions",
                 "Dpd" + "InferenceOperator"):
        assert call not in sources, call


def test_a_config_error_in_the_example_is_one_line_and_exit_2(installed: Installed, tmp_path: Path) -> None:
    # GIVEN the example's configuration asking for EKS 1.33, whose kubectl layer the fresh venv does not have (the
    # wheel brings the layers of 1.34 and 1.35 only; the older ones are extras)
    site = next(installed.venv.glob("lib/python*/site-packages"))
    assert (site / "aws_cdk" / "lambda_layer_kubectl_v34").is_dir()
    assert not (site / "aws_cdk" / "lambda_layer_kubectl_v33").exists()
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    text = (installed.app_dir / "config" / "ml-dev.yaml").read_text()
    assert 'version: "1.34"' in text
    (config_dir / "ml-dev.yaml").write_text(text.replace('version: "1.34"', 'version: "1.33"', 1))
    # WHEN the example app runs
    done = subprocess.run([installed.python, "app.py"], cwd=installed.app_dir,
                          env={**installed.env, "HPDPD_CONFIG_DIR": str(config_dir),
                               "CDK_OUTDIR": str(tmp_path / "cdk.out")},
                          capture_output=True, text=True, timeout=300, check=False)
    # THEN it ends with exit 2 and one line naming the file, the key the user wrote, the value and what to install,
    # as the CLI prints it, and no traceback
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and line.endswith(
        "ml-dev.yaml: eks.version: '1.33': needs the kubectl layer package aws-cdk.lambda-layer-kubectl-v33 (module "
        "aws_cdk.lambda_layer_kubectl_v33), which this Python environment lacks: pip install "
        "'hyperpod-dpd[kubectl-v33]'"), line
    assert not (tmp_path / "cdk.out").exists()


def test_plan_runs_from_the_fresh_venv(installed: Installed) -> None:
    done = installed.run(str(installed.venv / "bin" / "hpdpd"), "plan", "--model", "Llama-3.3-70B-Instruct",
                         "--instance", "ml.p5.48xlarge", "--input-tokens", "8000", "--output-tokens", "256",
                         "--concurrency", "8", "--output", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_preflight_reads_the_consumers_config_dir(installed: Installed, moto_server: str,
                                                  tmp_path: Path) -> None:
    # GIVEN AWS answered by moto's server and the consumer's configuration in a directory of its own
    env = {**installed.env, "AWS_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path),
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    # WHEN the installed command runs from elsewhere with --config-dir
    done = subprocess.run([str(installed.venv / "bin" / "hpdpd"), "preflight", "--env", "ml-dev", "--config-dir",
                           str(installed.app_dir / "config"), "--output", "json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    # THEN it found the file and ran its checks (the account has nothing deployed: some fail), without a traceback
    assert "Traceback" not in done.stderr
    assert done.returncode in (0, 1), done.stderr[-2000:]
    status = {c["name"]: c["status"] for c in json.loads(done.stdout)["checks"]}
    assert status["credentials"] == "pass"
