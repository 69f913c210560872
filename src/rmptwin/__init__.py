"""rmptwin: a digital twin of a global stock-market multicast system."""

__version__ = "0.1.0"
