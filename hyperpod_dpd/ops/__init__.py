"""Operations against a deployed environment: preflight checks, status, waiting for readiness, smoke tests.

Each module takes its AWS clients from a :class:`hyperpod_dpd.aws.ClientSource`, so the same code runs against AWS, a
local emulator (``AWS_ENDPOINT_URL``) or stubbed clients in tests. Rendering is the CLI's job (``hyperpod_dpd.cli``).
"""
