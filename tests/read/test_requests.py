"""Request economy: how many requests a plan makes for a file's metadata (issue #37).

A counting pyarrow filesystem (a `PyFileSystem` over the local one) counts what an object store would
bill: `get_file_info` calls (HEAD), file openings (pyarrow's S3 and GCS files HEAD on opening) and reads
(ranged GETs) with their bytes. A plan of one file must read its footer and the page indexes of the
probed columns in at most two reads, with no `get_file_info` when the size is known.
"""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

import layout.read.plan as lp
from layout.parquet import ParquetFile
from layout.read.cache import MetadataCache


class _CountedFile:
    """The Python file under a `pa.PythonFile`: pyarrow's `read_at` arrives as seek + read."""

    def __init__(self, f, counts: Counter) -> None:
        self.f, self.counts, self.closed = f, counts, False

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def tell(self):
        return self.f.tell()

    def read(self, n=-1):
        data = self.f.read(n)
        self.counts["reads"] += 1
        self.counts["bytes"] += len(data)
        return data

    def size(self):
        return self.f.size()

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def close(self):
        self.closed = True
        self.f.close()


class CountingHandler(fs.FileSystemHandler):
    """Reads the local filesystem, counting `get_file_info` (per path), listings, openings and reads."""

    def __init__(self) -> None:
        self.base = fs.LocalFileSystem()
        self.counts: Counter[str] = Counter()

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        self.counts["get_file_info"] += len(paths)
        return self.base.get_file_info(paths)

    def get_file_info_selector(self, selector):
        self.counts["listings"] += 1
        return self.base.get_file_info(selector)

    def open_input_file(self, path):
        self.counts["opens"] += 1
        return pa.PythonFile(_CountedFile(self.base.open_input_file(path), self.counts), mode="r")

    def open_input_stream(self, path):
        return self.open_input_file(path)

    def _read_only(self, *args, **kwargs):
        raise NotImplementedError("the counting filesystem only reads")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


@pytest.fixture
def counting():
    handler = CountingHandler()
    return handler, fs.PyFileSystem(handler)


@pytest.fixture(scope="module")
def many_groups(tmp_path_factory):
    """Four row groups of 50,000 rows, 8 KiB pages, page indexes, a bloom filter on `b`."""
    n = 200_000
    table = pa.table({"k": np.arange(n), "a": np.arange(n) * 2.0, "s": [f"v{i % 1000}" for i in range(n)],
                      "b": np.arange(n) % 7})
    path = tmp_path_factory.mktemp("requests") / "f.parquet"
    pq.write_table(table, path, row_group_size=50_000, write_page_index=True, data_page_size=8192,
                   bloom_filter_options={"b": {"ndv": 7, "fpp": 0.01}})
    return str(path)


def test_open_with_a_known_size_asks_nothing_but_the_footer(many_groups, counting):
    handler, cfs = counting
    size = fs.LocalFileSystem().get_file_info(many_groups).size
    pf = ParquetFile.open(many_groups, filesystem=cfs, size=size)
    assert pf.size == size
    assert dict(handler.counts) == {"opens": 1, "reads": 1, "bytes": min(size, 64 * 1024)}
    handler.counts.clear()
    ParquetFile.open(many_groups, filesystem=cfs)  # no size: the opened file's, no get_file_info
    assert handler.counts["get_file_info"] == 0 and handler.counts["opens"] == 1


def test_page_indexes_of_several_columns_in_one_read(many_groups, counting):
    handler, cfs = counting
    pf = ParquetFile.open(many_groups, filesystem=cfs)
    lazy = ParquetFile.open(many_groups)
    assert pf.num_row_groups == 4 and all(pf.has_column_index(rg, "k") for rg in range(4))
    handler.counts.clear()
    assert pf.load_page_indexes(["k", "s"]) == 1
    assert (handler.counts["opens"], handler.counts["reads"]) == (1, 1)
    assert pf.load_page_indexes(["k", "s"]) == 0  # read before: nothing to do
    for rg in range(4):
        for col in ("k", "s"):
            assert pf.offset_index(rg, col) == lazy.offset_index(rg, col)
            assert pf.raw_column_index(rg, col) == lazy.raw_column_index(rg, col)
            assert pf.column_index(rg, col) == lazy.column_index(rg, col)
    assert handler.counts["reads"] == 1  # every accessor took the bytes read ahead
    pf.offset_index(0, "a")  # a column not read ahead: read on demand, as before
    assert handler.counts["reads"] == 2
    # The same bytes counted as read (the cache sizes a file by them), whether read ahead or not.
    assert (pf.bytes_read == lazy.bytes_read
            + pf.row_groups[0].columns[pf.column("a").index].offset_index_length)


@pytest.mark.parametrize(("where", "columns"), [
    ("k BETWEEN 60000 AND 61000", ["k", "a"]),
    ("k > 120000 AND b = 3", None),
    ("s = 'v7' OR k < 10", ["s"]),
])
def test_a_plan_reads_footer_and_page_indexes_in_two_requests(many_groups, counting, monkeypatch,
                                                              where, columns):
    handler, cfs = counting
    expected = lp.plan(many_groups, where, columns, cache=False)
    info = fs.LocalFileSystem().get_file_info(many_groups)  # the listing's FileInfo: the size is known
    monkeypatch.setattr(lp, "list_parquet_files", lambda source: [(cfs, info)])
    monkeypatch.setattr(lp, "table_identifier", lambda source: None)
    cache = MetadataCache()
    got = lp.plan(many_groups, where, columns, cache=cache)
    assert got.counts == expected.counts and got.files == expected.files
    assert handler.counts["get_file_info"] == 0, handler.counts
    assert handler.counts["reads"] <= 2 and handler.counts["opens"] <= 2, handler.counts
    handler.counts.clear()
    again = lp.plan(many_groups, where, columns, cache=cache)  # warm: everything from memory
    assert again.counts == expected.counts
    assert handler.counts["reads"] == 0 and handler.counts["opens"] == 0, handler.counts


def test_parquet_testing_page_indexes_in_one_read(parquet_testing, counting):
    handler, cfs = counting
    path = str(parquet_testing / "data" / "alltypes_tiny_pages.parquet")
    pf = ParquetFile.open(path, filesystem=cfs)
    lazy = ParquetFile.open(path)
    names = [c.name for c in pf.columns]
    handler.counts.clear()
    assert pf.load_page_indexes(names) == 1 and handler.counts["reads"] == 1
    for rg in range(pf.num_row_groups):
        for name in names:
            assert pf.offset_index(rg, name) == lazy.offset_index(rg, name)
            assert pf.column_index(rg, name) == lazy.column_index(rg, name)
    assert handler.counts["reads"] == 1


def test_on_s3_a_plan_costs_two_gets(many_groups, monkeypatch):
    """The same plan against an S3 server (moto, on 127.0.0.1), counting the HTTP requests pyarrow's S3
    filesystem makes: two GETs (footer; page indexes) and one HEAD per opening, which pyarrow's Python
    API cannot spare (it takes no FileInfo that would carry the known size)."""
    server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    from werkzeug.serving import make_server

    where, columns = "k BETWEEN 60000 AND 61000", ["k", "a"]
    expected = lp.plan(many_groups, where, columns, cache=False)
    methods: Counter[str] = Counter()
    app = server.DomainDispatcherApplication(server.create_backend_app)

    def counted(environ, start_response):
        methods[environ["REQUEST_METHOD"]] += 1
        return app(environ, start_response)

    http = make_server("127.0.0.1", 0, counted, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{http.server_port}"
        keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}
        client = boto3.client("s3", endpoint_url=url, **keys)
        client.create_bucket(Bucket="lake")
        client.upload_file(many_groups, "lake", "f.parquet")
        s3 = fs.S3FileSystem(endpoint_override=url, scheme="http", access_key="test", secret_key="test",
                             region="us-east-1")
        info = s3.get_file_info("lake/f.parquet")
        monkeypatch.setattr(lp, "list_parquet_files", lambda source: [(s3, info)])
        monkeypatch.setattr(lp, "table_identifier", lambda source: None)
        methods.clear()
        got = lp.plan("lake/f.parquet", where, columns, cache=False)
        assert got.counts == expected.counts
        assert methods == {"GET": 2, "HEAD": 2}, methods
    finally:
        http.shutdown()
        thread.join()
