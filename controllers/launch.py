"""Run the rmptwin controller app through os-ken's AppManager (os-ken ships no manager binary).

    python controllers/launch.py --port 6653 --wiring STATE/wiring.json --state-dir STATE
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from os_ken import cfg
from os_ken.base.app_manager import AppManager  # must precede os_ken.controller (an import cycle in os-ken)
from os_ken.controller import controller  # noqa: F401 - registers the --ofp-* options read below

CONTROLLER_APP = "rmptwin_controller"   # controllers/rmptwin_controller.py, found on sys.path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=6653)
    # Loopback unless the switches run on other servers: then this machine's address towards
    # them, which for local servers is the project's own underlay bridge.
    ap.add_argument("--listen-host", default="127.0.0.1")
    ap.add_argument("--wiring", required=True)
    ap.add_argument("--state-dir", required=True)
    args = ap.parse_args()
    # The app reads its wiring and state directory from the environment when AppManager loads it.
    os.environ["RMPTWIN_WIRING"] = str(Path(args.wiring).resolve())
    os.environ["RMPTWIN_STATE_DIR"] = str(Path(args.state_dir).resolve())
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg.CONF(args=["--ofp-listen-host", args.listen_host, "--ofp-tcp-listen-port", str(args.port)],
             project="os_ken", default_config_files=[])
    AppManager.run_apps([CONTROLLER_APP])
    return 0


if __name__ == "__main__":
    sys.exit(main())
