"""The one way rmptwin makes a rich console: wrapped for a person, never for a pipe.

rich wraps every line at the terminal's width, and when its output is not a terminal it
takes ``COLUMNS`` or 80. Piped into ``tail``, a file or CI's log, a path or an error line
would then break mid-word, and whether it breaks would depend on the length of a temporary
path. So a console whose stream is not a terminal gets a width no line of ours reaches and
soft wrapping: every line is printed whole, every table at its natural width.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

# Wider than any line or table the project prints (the widest, a benchmark table, is ~300
# columns); nothing here draws a full-width rule or panel, which would be this wide.
UNWRAPPED_WIDTH = 4096


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): at the terminal's width on a terminal, unwrapped elsewhere."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=UNWRAPPED_WIDTH, soft_wrap=True)


def print_error(message: str, *, prefix: str = "rmptwin:") -> None:
    """One red error line on stderr, never wrapped: what every command prints for a UserError."""
    # Text, not markup: an error quoting a YAML list ("[s1, s2]") must print as written
    make_console(stderr=True).print(Text.assemble((prefix, "bold red"), " ", message), highlight=False)
