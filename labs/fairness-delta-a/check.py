"""Expected outcome of the lab: `.venv/bin/python labs/fairness-delta-a/check.py DIR` checks what you produced (the
directory the README's steps wrote); without DIR it runs a quick simulated version and checks that.
Prints one PASS/FAIL line per expectation; exit 0 when every one passes."""

import sys

try:
    from rmptwin.studies.labs import main
except ModuleNotFoundError:   # a Python without rmptwin (not the project's venv): say which one to use
    sys.exit("labs/fairness-delta-a/check.py: this Python has no rmptwin; run it with the project's venv: "
             ".venv/bin/python labs/fairness-delta-a/check.py DIR")

if __name__ == "__main__":
    sys.exit(main("fairness-delta-a", sys.argv[1:]))
