"""What ``claudetrace import`` stores, held to a digest of every table.

A store is made from a tree ``bench import`` writes (smaller, the same shape)
and from the transcript fixtures, and every table (the search index's own
tables too) is dumped, sorted, its rows with their rowids, and hashed.  The
digests are ``tests/fixtures/import_dump.json``: work on the speed of the
converter, the session model, pricing, the search words or the writer must
leave them as they are.  A change meant to store something else writes them
again with ``CLAUDETRACE_WRITE_IMPORT_DUMP=1`` (and says so in its commit).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from claudetrace.bench.transcripts import write_tree
from claudetrace.cli import cli

FIXTURES = Path(__file__).parent / "fixtures"
DIGESTS = FIXTURES / "import_dump.json"
#: What a recording keeps of its files' metadata (their paths, times and inodes,
#: not what they hold: the import compares it to see a file unchanged): its
#: fingerprint and each file's stat as last peeked.
_STAT = re.compile(r'"fingerprint": "[0-9a-f]+"|"peeked": \{[^{}]*\}')


def table_digests(db: Path, root: Path) -> dict[str, list[object]]:
    """Rows and a digest of each table of ``db``, the folder ``root`` (where the
    imported files were: a temporary one) written ``<root>``, and what a
    recording keeps of its files' metadata left out (:data:`_STAT`)."""
    conn = sqlite3.connect(db)
    try:
        # Every table but the schema's version (a migration of anything else moves it).
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'alembic_version'"
            " ORDER BY name")]
        out: dict[str, list[object]] = {}
        for name in names:
            try:
                rows = conn.execute(f'SELECT rowid, * FROM "{name}"').fetchall()
            except sqlite3.OperationalError:  # WITHOUT ROWID
                rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            text = sorted(_STAT.sub("<stat>", repr(row).replace(str(root), "<root>"))
                          for row in rows)
            out[name] = [len(text), hashlib.sha256("\n".join(text).encode()).hexdigest()]
        return out
    finally:
        conn.close()


def test_the_stored_tables_are_unchanged(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "in"
    write_tree(root / "bench" / "projects", sessions=12, size=3 << 20, agents=4)
    shutil.copytree(FIXTURES / "transcripts", root / "fixtures")
    done = CliRunner().invoke(cli, ["import", str(root), "--db", str(db_path)])
    assert "imported" in done.output, done.output
    got = table_digests(db_path, root)
    if os.environ.get("CLAUDETRACE_WRITE_IMPORT_DUMP") == "1":
        DIGESTS.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(DIGESTS.read_text())
    assert {k: v for k, v in got.items() if want.get(k) != v} == {}
    assert got.keys() == want.keys()
    assert got["recordings"][0] > 12 and got["events"][0] > 1000
