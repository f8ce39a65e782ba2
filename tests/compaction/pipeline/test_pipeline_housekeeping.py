"""Housekeeping of the pipeline: the table registry (one broken spec does not stop the other tables) and the
run directories (old ones are pruned)."""

from __future__ import annotations

import pytest

from layout.errors import ConfigError
from layout.registry import find_spec

GOOD = """table: {table}
owner: {{name: Team, email: team@example.com}}
sort: {{keys: [{{column: id}}]}}
"""


def test_a_broken_spec_of_another_table_is_skipped(tmp_path, caplog):
    (tmp_path / "a.yaml").write_text(GOOD.format(table="ns.a"))
    (tmp_path / "b.yaml").write_text("table: ns.b\nowner: {name: Team}\ntarget_file_size: lots\n")
    assert find_spec("ns.a", tmp_path).table == "ns.a"
    assert "b.yaml" in caplog.text and "ignoring a broken table spec" in caplog.text


def test_a_tables_own_broken_spec_is_the_error(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD.format(table="ns.a"))
    (tmp_path / "b.yaml").write_text("table: ns.b\nowner: {name: Team}\ntarget_file_size: lots\n")
    with pytest.raises(ConfigError, match=r"(?s)no valid spec for table 'ns.b'.*b.yaml: target_file_size"):
        find_spec("ns.b", tmp_path)


def test_unknown_and_duplicate_tables(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD.format(table="ns.a"))
    with pytest.raises(ConfigError, match=r"no spec for table 'ns.z'.*specs exist for: ns.a"):
        find_spec("ns.z", tmp_path)
    (tmp_path / "a2.yml").write_text(GOOD.format(table="ns.a"))
    with pytest.raises(ConfigError, match="already specified"):
        find_spec("ns.a", tmp_path)


def test_old_run_directories_are_pruned(tmp_path):
    import os
    import time

    from layout.compaction.pipeline.steps import prune_work_dirs

    old, new = tmp_path / "20250101T000000-a", tmp_path / "20260101T000000-b"
    for run in (old, new):
        run.mkdir()
        (run / "run.json").write_text("{}")
        (run / "plan.json").write_text("{}")
    (tmp_path / "lease.json").write_text("{}")  # a table's lease lives beside the runs: never touched
    now = time.time()
    os.utime(old / "run.json", (now - 20 * 86_400, now - 20 * 86_400))
    assert prune_work_dirs(tmp_path, keep_days=14, now=now) == 1
    assert not old.exists() and (new / "plan.json").exists() and (tmp_path / "lease.json").exists()
