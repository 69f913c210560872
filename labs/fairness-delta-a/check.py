"""Expected outcome of the lab: `python labs/fairness-delta-a/check.py DIR` checks what you produced (the
directory the README's steps wrote); without DIR it runs a quick simulated version and checks that.
Prints one PASS/FAIL line per expectation; exit 0 when every one passes."""

import sys

from rmptwin.studies.labs import main

if __name__ == "__main__":
    sys.exit(main("fairness-delta-a", sys.argv[1:]))
