"""The compaction job's figures (`layout.compaction.executor.figures`), pure: rows and key ranges from the
manifests, file counts, and the checks of what Spark read against them."""
from __future__ import annotations

import pytest

from layout.compaction.executor.figures import (
    ManifestRangeMiss,
    check_native_rows,
    check_ranges,
    file_counts,
    manifest_figures,
)
from layout.compaction.executor.partitions import key_dir
from layout.compaction.executor.sort_prefix import plan_prefix
from layout.compaction.planning.planner import InputFile, RewriteGroup
from layout.errors import InputError


def _group(gid, *files, output_files=1):
    return RewriteGroup(group_id=gid, partition="p", inputs=files, output_files=output_files, reasons=())


A = InputFile(path="a", size=1, rows=10, ranges=((5, 9), (100, 200), None), partition_key="[]")
B = InputFile(path="b", size=1, rows=4, ranges=((1, 6), (150, 400), None), partition_key="[]")


def test_manifest_figures_cover_every_file_or_give_way_to_a_first_pass():
    """Rows per (group, partition) and each prefix key's range over all files' manifest bounds; a file without
    bounds of a prefix key means a first pass (None); an empty file has none and needs none; keys after one
    without an ordinal get no range (they never enter the prefix)."""
    empty = InputFile(path="e", size=1, rows=0, ranges=(None, None, None), partition_key="[]")
    ordinals = ["o0", "o1", None]
    parts, figures = manifest_figures([_group(0, A, empty), _group(1, B)], ordinals)
    assert parts == {(0, key_dir("[]")): ("[]", 10), (1, key_dir("[]")): ("[]", 4)}
    assert figures == [{"__low0": 1, "__high0": 9, "__low1": 100, "__high1": 400}]
    emptied = empty.model_copy(update={"partition_key": '["x"]'})  # a partition of nothing but an empty file
    assert manifest_figures([_group(0, A, emptied)], ordinals)[0] == {(0, key_dir("[]")): ("[]", 10)}
    # A string first key: no prefix, no ranges needed, even where the manifests have none.
    _, figures = manifest_figures([_group(0, A)], [None, "o1", "o2"])
    assert figures == [{"__low1": None, "__high1": None, "__low2": None, "__high2": None}]
    unknown = A.model_copy(update={"ranges": ((5, 9), None, None)})
    assert manifest_figures([_group(0, unknown, B)], ordinals) is None
    # an older plan
    assert manifest_figures([_group(0, A.model_copy(update={"ranges": ()}))], ordinals) is None


def test_observed_ranges_within_the_planned_ones_pass_and_others_name_the_key():
    prefix = plan_prefix([("o0", "asc", "first", 1, 9), ("o1", "asc", "first", 100, 400)])
    check_ranges(prefix, [(1, 9), (150, 150)], ["d", "k"])
    check_ranges(prefix, [(None, None), (100, 400)], ["d", "k"])  # a key without values
    with pytest.raises(ManifestRangeMiss, match=r"sort key k: the input holds ordinals 99\.\.400"):
        check_ranges(prefix, [(1, 9), (99, 400)], ["d", "k"])
    with pytest.raises(ManifestRangeMiss, match="sort key d"):
        check_ranges(prefix, [(1, 10), (100, 400)], ["d", "k"])


def test_a_file_that_reads_short_is_named():
    native = {"x/a": ("s3://b/x/a", 10), "x/b": ("s3://b/x/b", 4)}
    check_native_rows(native, [("x/a", 6), ("x/a", 4), ("x/b", 4), (None, 7)])  # a file across partitions
    with pytest.raises(InputError, match=r"s3://b/x/b: Spark read 3 rows of it, the manifest says 4"):
        check_native_rows(native, [("x/a", 10), ("x/b", 3)])


def test_file_counts_share_a_group_s_files_by_rows():
    parts = {(0, "m1"): ("k1", 300), (0, "m2"): ("k2", 100), (1, "m3"): ("k3", 5)}
    assert (file_counts([_group(0, A, output_files=4), _group(1, B)], parts)
            == {(0, "m1"): 3, (0, "m2"): 1, (1, "m3"): 1})
