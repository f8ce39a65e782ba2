"""``python -m layout.spec --schema``: print the JSON schema of table specs.

Regenerate the published schema with ``python -m layout.spec --schema > schemas/table-spec.schema.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from layout.spec.schema import table_spec_schema_json


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m layout.spec",
        description="Table spec tools. Regenerate the published schema with: "
        "python -m layout.spec --schema > schemas/table-spec.schema.json",
    )
    parser.add_argument("--schema", action="store_true", help="print the JSON schema of table specs")
    args = parser.parse_args(argv)
    if not args.schema:
        parser.print_usage(sys.stderr)
        return 2
    sys.stdout.write(table_spec_schema_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
