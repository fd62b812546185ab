"""``hpdpd``'s entry point: how a command ends when its output has nowhere to go."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BASE = ["plan", "--model", "Llama-3.3-70B", "--instance", "ml.p5.48xlarge", "--input-tokens", "4096",
        "--output-tokens", "256", "--concurrency", "8"]


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    # GIVEN the installed command piped into a reader that is gone before the report is written (`| head -0`)
    command = [str(Path(sys.executable).parent / "hpdpd"), *BASE]
    producer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.close()
    err = producer.stderr.read()
    producer.wait(timeout=60)
    # THEN the command ends with status 1 and no traceback
    assert (producer.returncode, err) == (1, b"")
