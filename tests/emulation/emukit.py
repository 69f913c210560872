"""Constants shared by the emulation tests and their conftest."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
NET4 = HERE / "net4.yaml"
# IGMP version per host: v2 and v3 hosts in the same network, so joins and leaves of
# both versions are exercised by the same tests.
IGMP = {"h1": 3, "h6": 2, "h2": 2, "h3": 3, "h4": 2, "h5": 3}
METER_PPS = 1000
