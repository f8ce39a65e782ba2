"""Where a Parquet file's bytes come from: a local file or a file of a pyarrow filesystem.

A source opens the file once per batch of reads (`reader()`), so that reading a footer, or the page
indexes of many chunks coalesced by `layout.parquet.ranges`, costs one opening; the functions below
read exact byte ranges from a source and turn a short read or an OS error into a `ParquetError`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from layout.errors import ParquetError
from layout.parquet.ranges import DEFAULT_GAP, read_ranges

__all__ = ["FsSource", "LocalSource", "checked", "read_many", "read_one"]


class LocalSource:
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    @contextlib.contextmanager
    def reader(self) -> Iterator[tuple[Callable[[int, int], bytes], int]]:
        """`(read(offset, length), size)`. A local read opens the file for itself: an open() costs
        microseconds here, and no descriptor outlives a read."""
        yield self.read_at, os.stat(self.path).st_size

    def read_at(self, offset: int, length: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            out = os.pread(fd, length, offset)
            while len(out) < length:  # pread may return short reads on some filesystems
                more = os.pread(fd, length - len(out), offset + len(out))
                if not more:
                    break
                out += more
            return out
        finally:
            os.close(fd)


class FsSource:
    """A file of a pyarrow filesystem. Each batch of reads opens it once: pyarrow's S3 and GCS files cost
    a HEAD request on opening (pyarrow's Python API takes no FileInfo that would carry the size) and
    none per read, so the size comes from that open too, never from a `get_file_info` of its own."""

    __slots__ = ("fs", "path")

    def __init__(self, path: str, fs: Any) -> None:
        self.path, self.fs = path, fs

    @contextlib.contextmanager
    def reader(self) -> Iterator[tuple[Callable[[int, int], bytes], int]]:
        with self.fs.open_input_file(self.path) as f:
            def read(offset: int, length: int) -> bytes:
                data = f.read_at(length, offset)  # pyarrow's order: (nbytes, offset); bytes or a Buffer
                return data if isinstance(data, bytes) else data.to_pybytes()

            yield read, f.size()


def checked(read: Callable[[int, int], bytes], path: str, offset: int, length: int) -> bytes:
    data = read(offset, length)
    if len(data) != length:
        raise ParquetError(path, f"truncated file: wanted {length} bytes at offset {offset}, got {len(data)}")
    return data


def read_one(source: Any, path: str, offset: int, length: int) -> bytes:
    return read_many(source, path, [(offset, length)])[0]


def read_many(source: Any, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
    """Each range's bytes, in one opening of the file and as few reads as `DEFAULT_GAP` allows."""
    try:
        with source.reader() as (read, _):
            return read_ranges(lambda o, n: checked(read, path, o, n), ranges, DEFAULT_GAP)
    except FileNotFoundError:
        raise ParquetError(path, "file not found") from None
    except OSError as e:
        where = (f"{ranges[0][1]} bytes at offset {ranges[0][0]}" if len(ranges) == 1
                 else f"{len(ranges)} ranges")
        raise ParquetError(path, f"cannot read {where}: {e}") from None
