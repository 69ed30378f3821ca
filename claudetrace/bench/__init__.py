"""Benchmarks that measure claudetrace on this machine (see ``claudetrace bench``)."""
