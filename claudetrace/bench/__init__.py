"""Benchmarks that measure claudetrace on this machine (see ``claudetrace bench``)."""

from __future__ import annotations

from pathlib import Path


def compile_bytecode(root: Path | None = None) -> None:
    """Compile claudetrace's modules to bytecode (``__pycache__``), as pip does when
    it installs a wheel, before a benchmark starts its processes.

    Every process a benchmark times (proxy, indexer, telemetry worker) imports
    claudetrace afresh.  In a development checkout where bytecode was never
    written (``PYTHONDONTWRITEBYTECODE``, a read-only tree), each of them would
    compile every module it imports from source first: about 30 ms per process,
    which an installed package never pays.  Modules already compiled are left
    alone; a tree we cannot write to is measured as it is.  Compiled for the
    optimisation level of this interpreter and for none, the one the benchmarked
    processes run at unless ``PYTHONOPTIMIZE`` says otherwise (they inherit it, and
    this interpreter too).  ``root``: the package (claudetrace's by default).
    """
    import compileall
    import sys

    for level in sorted({0, sys.flags.optimize}):
        compileall.compile_dir(root or Path(__file__).resolve().parent.parent, quiet=2,
                               optimize=level)
