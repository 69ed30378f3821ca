"""The version of claudetrace (read by the build too: one place)."""

__version__ = "0.1.0"
