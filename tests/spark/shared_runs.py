"""What conftest's session-wide line3 fixtures run, for the tests that repeat it another way."""

from pathlib import Path

LINE3 = Path(__file__).resolve().parents[2] / "experiments" / "line3.yaml"
LINE3_SWEEP = {"protocol.delta_a_ms": [20, 150]}   # and seeds=1: two runs
