"""Help text without a value placeholder after a flag.

typer 0.29's rich help prints every option's type, flags included: ``--strict <bool>``,
``--help <bool>``, which reads as if the flag took a value (``--strict true`` then fails: a
flag takes none). Click's own help and typer's usage line leave flags bare; this makes the
rich panel do the same, once for every command, by answering "no type to show" for a flag.
Imported by ``cli.main`` before any command is built; a typer without the method is left alone.
"""

from __future__ import annotations

import typer.core

_option = getattr(typer.core, "TyperOption", None)
_shown = getattr(_option, "display_type_rich", None)

if _option is not None and _shown is not None and not getattr(_shown, "_rmptwin_flags_bare", False):
    def _display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        return _shown(self, ctx)

    _display_type_rich._rmptwin_flags_bare = True
    _option.display_type_rich = _display_type_rich
