# hyperpod-dpd: two commands on a fresh machine.
#   make synth   set up, then synthesize every environment offline into cdk.out/ (and dist/k8s/, dist/grafana/)
#   make test    set up, then run the whole suite
# Everything installs into the checkout (.venv/, node_modules/); nothing global.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_PY := $(VENV)/.installed
STAMP_NODE := node_modules/.installed
CHECKOV_VENV := .venv-checkov
STAMP_CHECKOV := $(CHECKOV_VENV)/.installed

export PATH := $(CURDIR)/node_modules/node/bin:$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.cache/jsii
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup setup-checkov setup-system synth test checkov lint typecheck bench imports offerings stateful-manifest clean

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

$(STAMP_PY): requirements.txt requirements-dev.txt constraints.txt pyproject.toml setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# checkov pins dependencies that clash with the CDK toolchain, so it gets a venv of its own.
$(STAMP_CHECKOV): requirements-checkov.txt constraints-checkov.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt -c constraints-checkov.txt
	@touch $@

$(STAMP_NODE): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The configuration is checked before cdk.out is touched, and the new assembly replaces the old one only once it
# synthesized without errors: a typo never destroys the last good output.
synth: setup
	$(PY) -m hyperpod_dpd.stacks.application --check
	rm -rf .cache/cdk.out.next
	cdk synth --quiet --output .cache/cdk.out.next
	rm -rf cdk.out && mv .cache/cdk.out.next cdk.out
	$(PY) -m hyperpod_dpd.k8s.gitops --out dist/k8s
	$(PY) -m hyperpod_dpd.monitoring.export --out dist/grafana
	$(PY) -m hyperpod_dpd.synth_summary cdk.out

# The type check runs beside the tests (two pytest workers; each test module stays on one worker, so its
# module-scoped synth happens once); a type error fails the target after the tests have run.
test: setup setup-checkov setup-system
	$(PY) -m ruff check .
	@mkdir -p .cache
	@$(PY) scripts/typecheck.py > .cache/typecheck.log 2>&1 & typecheck=$$!; \
	$(PY) -m pytest -n 2 --dist loadfile; tests=$$?; \
	if wait $$typecheck; then tail -1 .cache/typecheck.log; else cat .cache/typecheck.log; exit 1; fi; exit $$tests

checkov: synth setup-checkov
	BC_SKIP_MAPPING=TRUE $(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml -d cdk.out -d dist/k8s --output cli

lint: setup
	$(PY) -m ruff check .

# mypy over the distribution as it installs (hyperpod_dpd.*), with its cache in .cache/mypy.
typecheck: setup
	$(PY) scripts/typecheck.py

bench: setup
	bash bench/synth.sh
	$(PY) bench/calibration.py

# Record the logical ids of every environment's stateful resources (after a deliberate, reviewed change).
stateful-manifest: setup
	$(PY) scripts/stateful_manifest.py

# Regenerate hpdpd/catalogue/offerings.py from the installed cfn-lint and aws-cdk-lib validators.
offerings: setup
	PYTHONPATH=. $(PY) scripts/probe_offerings.py

# Regenerate the typed cdk8s classes in k8s/imports/ from the vendored operator CRD (offline; the output is committed).
IEC_CRD := k8s/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml
imports: $(STAMP_NODE)
	rm -rf k8s/imports
	cdk8s import $(IEC_CRD) --language python --output k8s/imports --no-check-upgrade

clean:
	rm -rf cdk.out dist .cache
