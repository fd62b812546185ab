"""Operations against a deployed environment: preflight checks, status, waiting for readiness, smoke tests.

Each module takes its AWS clients from a :class:`hpdpd.aws.ClientSource`, so the same code runs against AWS, a
local emulator (``AWS_ENDPOINT_URL``) or stubbed clients in tests. Rendering is the CLI's job (``hpdpd.cli``).
"""
