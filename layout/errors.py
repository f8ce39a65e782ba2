"""The one exception hierarchy of lakesort.

Every error a user can see says what went wrong, where (file, column, key) and how to fix it.
The CLI maps `UsageError` and `InputError` to exit status 2 and every other `LakesortError` to 1.
"""

from __future__ import annotations


class LakesortError(Exception):
    """Base class of every error raised by lakesort."""


class UsageError(LakesortError):
    """The caller asked for something that cannot be done as asked (bad option, unknown column)."""


class InputError(LakesortError):
    """An input could not be read: a missing path, an unreadable or malformed file or config."""


class ParquetError(InputError):
    """A Parquet file is corrupt, truncated, encrypted or not Parquet at all.

    `path` names the file and `detail` says what is wrong in it; the message adds both.
    """

    def __init__(self, path: str, detail: str, *, hint: str | None = None) -> None:
        self.path = str(path)
        self.detail = detail
        self.hint = hint
        message = f"{self.path}: {detail}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class ConfigError(InputError):
    """A configuration file (table spec, catalog config) is invalid; the message names the file and key."""
