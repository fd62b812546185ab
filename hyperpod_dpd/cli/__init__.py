"""The ``hpdpd`` command line: operations (preflight, status, wait, smoke) and sizing (plan)."""
