"""``python -m rmptwin.cli.main``: the same as the ``rmptwin`` command."""

from rmptwin.cli import main

main()
