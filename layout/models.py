"""The one base of lakesort's contracts: frozen pydantic models that refuse unknown fields.

Plans, staged manifests, run records, lease owners, settings and the DAGs' XCom payloads are all
`Frozen` models: values that travel as JSON (files, XCom) and are validated when they are read back.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """Immutable, no extra fields: a typo in a JSON document is an error, not a silently dropped key."""

    model_config = ConfigDict(frozen=True, extra="forbid")
