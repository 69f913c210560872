"""User-facing errors: one clear line that says what to fix, never a traceback."""


class UserError(Exception):
    """A problem the user can fix (bad input, missing dependency, not root).

    The CLI prints ``rmptwin: <message>`` and exits 2.
    """
