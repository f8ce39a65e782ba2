"""The one base of lakesort's contracts: frozen pydantic models that refuse unknown fields.

Plans, staged manifests, run records, lease owners, settings and the DAGs' XCom payloads are all
`Frozen` models: values that travel as JSON (files, XCom) and are validated when they are read back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen", "Strategy"]

# How a table's rows are ordered: by the sort keys in turn, or by a curve over them (`layout.curves`). Here,
# not in `layout.spec`, so that the rewrite plan (`layout.compaction.plan`) names it without importing the
# spec's SQL parser: the Spark job's driver reads the plan before it starts Spark.
Strategy = Literal["linear", "zorder", "hilbert"]


class Frozen(BaseModel):
    """Immutable, no extra fields: a typo in a JSON document is an error, not a silently dropped key."""

    model_config = ConfigDict(frozen=True, extra="forbid")
