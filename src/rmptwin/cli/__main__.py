"""``python -m rmptwin.cli.main``: the same as the ``rmptwin`` command."""

from rmptwin.cli.main import main

main()
