"""The CodeBuild environment every toolkit build runs in: the pipeline's steps (stacks/pipeline_stack.py) and each
environment's checks runner (infra/checks_runner.py), so a check runs on the same image and runtimes wherever it runs.

The project needs Python 3.11 and npm (it brings its own Node 22, README "Two commands"); ``aws/codebuild/standard:7.0``
offers ``python: 3.11`` and ``nodejs: 20`` as runtime versions (CodeBuild user guide, "Docker images provided by
CodeBuild", runtimes of the Ubuntu standard 7.0 image).
"""

from __future__ import annotations

from aws_cdk import aws_codebuild as codebuild

BUILD_IMAGE = codebuild.LinuxBuildImage.STANDARD_7_0
RUNTIMES = {"python": "3.11", "nodejs": "20"}
SETUP = "make setup"  # the checkout's own set-up: .venv/ from PyPI, node_modules/ from npm
HPDPD = ".venv/bin/hpdpd"
