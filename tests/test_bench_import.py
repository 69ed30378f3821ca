"""``claudetrace bench import``: the generated tree, and the rows it times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from claudetrace.bench.transcripts import NAIVE_LOOP, run_import_bench, write_tree
from claudetrace.cli import cli
from claudetrace.indexer import open_settled_store


def test_the_tree_imports_to_the_naive_loops_figures(tmp_path: Path, db_path: Path) -> None:
    tree = write_tree(tmp_path / "projects", sessions=4, size=400_000, agents=3)
    assert tree.files == len(list(tree.root.rglob("*.jsonl"))) > 4
    assert any(tree.root.glob("*/*/subagents/agent-*.jsonl"))
    done = CliRunner().invoke(cli, ["import", str(tree.root), "--db", str(db_path)])
    assert done.exit_code == 0, done.output
    naive = json.loads(subprocess.run([sys.executable, "-c", NAIVE_LOOP, str(tree.root)],
                                      capture_output=True, check=True).stdout)
    store = open_settled_store(str(db_path))
    try:
        recs = store.list_recordings()
        got = [sum(getattr(r, k) for r in recs) for k in (
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")]
    finally:
        store.close()
    assert len(recs) == 4
    assert got == [sum(v[i] for v in naive.values()) for i in range(4)]


def test_the_bench_times_each_row(tmp_path: Path) -> None:
    tree, rows = run_import_bench(sessions=2, size=100_000, repeat=1, ccusage=None)
    assert [r.name for r in rows] == [
        "claudetrace import", "  then usage daily", "  import + usage daily",
        "  the pass after it (CPU)", "  re-import, unchanged", "import --wait (converting)",
        "naive loop"]
    assert all(len(r.seconds) == 1 and r.peak_mib > 0 and not r.note for r in rows)
    assert tree.sessions == 2 and tree.files >= 2
