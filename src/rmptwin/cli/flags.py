"""Help text without a value placeholder after a flag.

typer 0.29's rich help prints every option's type, flags included: ``--strict <bool>``,
``--help <bool>``, which reads as if the flag took a value (``--strict true`` then fails: a
flag takes none). Click's own help and typer's usage line leave flags bare; this makes the
rich panel do the same, once for every command, by answering "no type to show" for a flag.
Imported by ``cli.main`` before any command is built; a typer without the method is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer.core

if TYPE_CHECKING:
    import click

_option: Any = getattr(typer.core, "TyperOption", None)
_shown: Any = getattr(_option, "display_type_rich", None)   # the method of this typer, if it has one

if _option is not None and _shown is not None and not getattr(_shown, "_rmptwin_flags_bare", False):
    def _display_type_rich(self: typer.core.TyperOption, ctx: click.Context) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        shown: str | None = _shown(self, ctx)
        return shown

    _display_type_rich._rmptwin_flags_bare = True  # type: ignore[attr-defined]  # a marker read back above
    _option.display_type_rich = _display_type_rich
