"""``python -m rmptwin.cli``: the same as the ``rmptwin`` command."""

from rmptwin.cli.main import main

main()
