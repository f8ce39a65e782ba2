"""Predicates: the immutable expression tree (`predicate`), SQL text to a tree (`sql`, with sqlglot),
and binding a tree to a file's column types (`bind`), all visited with `@singledispatch` visitors.

May import: the ground floor (errors). Knows nothing of files: `layout.parquet` sits below it and
`layout.read` above it.
"""
