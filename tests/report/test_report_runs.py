"""The report's runs table: a run's commit in parts, its attempts against other writers, and the delete files
committed during its job that it carried onto its new files, under its status; nothing for a plain run."""

from __future__ import annotations

from datetime import timedelta

from report_rows import T0, page, render, run, table_rows


def test_a_runs_parts_attempts_and_carried_deletes_are_said_under_its_status(tmp_path):
    runs = [
        run("a.t", "plain", T0, parts=1, parts_committed=1, commit_attempts=1, delete_files_carried=0),
        run("a.t", "older", T0 + timedelta(hours=1)),  # a row written before these columns: None
        run("a.t", "parts", T0 + timedelta(hours=2), status="failed", error="commit: refused",
            parts=3, parts_committed=2, commit_attempts=2),
        run("a.t", "busy", T0 + timedelta(hours=3), parts=1, parts_committed=1, commit_attempts=4,
            delete_files_carried=2),
    ]
    status = {r[1]: r[3] for r in table_rows(page(render(tmp_path, [], runs), "a.t"), "runs")}
    assert status["plain"] == status["older"] == "committed"
    # The badge, then a line of its own under it.
    assert status["parts"] == "failed" + "2/3 parts committed"
    assert status["busy"] == "committed" + "4 commit attempts \u00b7 2 concurrent delete file(s) carried"
