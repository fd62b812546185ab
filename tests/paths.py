"""Where the tests find things. Unit and construct tests read the fixture configuration under ``tests/fixtures``;
only the checks of the user's configuration (``tests/test_user_config.py``) read ``config/`` (or ``$HPDPD_CONFIG_DIR``
as it was when the run started), so editing ``config/`` never breaks the suite."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_CONFIG_DIR = ROOT / "tests" / "fixtures" / "config"
USER_CONFIG_DIR = Path(os.environ.get("HPDPD_USER_CONFIG_DIR") or os.environ.get("HPDPD_CONFIG_DIR") or ROOT / "config")
