"""``python -m claudetrace.formats.convert_child``: the process that converts an
import's transcripts a few ahead of the one storing them
(:func:`claudetrace.formats.imports.convert_child`).  Started this way, not by
:mod:`multiprocessing`, so that it loads the converters alone (not the command
line, nor SQLAlchemy) and needs no helper process of its own."""

from __future__ import annotations

import sys

from .imports import convert_child

if __name__ == "__main__":
    sys.exit(convert_child(sys.argv[1] if len(sys.argv) > 1 else None))
