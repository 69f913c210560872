"""rmptwin: a digital twin of a global stock-market multicast system."""

from rmptwin import corebuild

__version__ = "0.1.0"

# Compiled or interpreted cores, chosen once, before any of them is imported (rmptwin.corebuild).
corebuild.select()
