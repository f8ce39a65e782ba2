"""The reader library: what a page-index-aware reader must read, and reading exactly that.

    plan_values  Plan / FilePlan / RowGroupPlan: the value planning produces and reading consumes
    plan         plan(source, where, columns) -> Plan (files, row groups, pages; cold or warm cache)
    pruning      three-valued evaluation against statistics, column indexes and bloom filters
    pages        page search structures (binary search over ordered column indexes)
    selection    RowSelection: row ranges intersected and united across columns
    scan         read_table / read_batches / read_sorted of a Plan
    merge        the loser-tree k-way merge of sorted Arrow streams (merge_kernels: its inner loops)
    cache        the bounded metadata cache keyed by file identity
    iceberg      Iceberg sources: snapshot files pruned on manifest bounds
    inspect      what a file holds, page by page (`lakesort inspect`)
    overlap      how far files overlap in a key

May import: layout.expr, layout.parquet and the ground floor (errors, io, catalog, settings). Never
compaction, verify, metrics or report: the reader depends on nothing that rewrites or checks.
"""
