"""The sort key's sample and the file boundaries of a partition cut into several files: the first pass's
summary (when the manifests cannot give rows and key ranges), the rows drawn without it (`sample_keys`), and
the quantiles (`boundaries`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from layout.compaction.executor.partitions import GROUP, PART, PART_KEY

from .columns import SOURCE
from .frames import before, key_struct, literal_frame

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from layout.compaction.executor.sort_prefix import PrefixPlan
    from layout.compaction.plan import RewriteGroup, SortKeyModel

    from .read import NativeScan
    from .write import CurveIndex

# Rows drawn per output file to place the file boundaries (sampled quantiles of the sort key): with 1,000
# a file's share of its partition's rows is off by about 3% (1/sqrt(1000)); at most MAX_SAMPLE per
# partition, so the sample never grows with the data. It is drawn in the pass that fingerprints the input.
SAMPLES_PER_FILE = 1000


MAX_SAMPLE = 1_000_000


SAMPLE_SEED = 42


def summarize(spark: SparkSession, df: DataFrame, groups: Sequence[RewriteGroup],
              keys: Sequence[SortKeyModel], ordinals: Sequence[str | None]) -> DataFrame:
    """One aggregation over the input's sort and partition columns: per (group, partition, natively read
    file) the first partition key, rows, each key's smallest and largest ordinal (`__low<i>`, `__high<i>`, for
    the sort prefix), and `__sample`, a Bernoulli sample of the sort key (structs k0..kn) at a rate that draws
    about SAMPLES_PER_FILE rows per planned output file of the group."""
    rates = []
    for g in groups:
        rows = sum(f.rows for f in g.inputs) or 1
        rates.append((g.group_id,
                      min(1.0, min(SAMPLES_PER_FILE * max(1, g.output_files), MAX_SAMPLE) / rows)))
    key = key_struct(keys)
    # Drawn in a projection: Spark refuses a random expression inside an aggregate.
    drawn = (df.join(F.broadcast(literal_frame(spark, rates, [GROUP, "__rate"])), GROUP)
             .withColumn("__drawn", F.rand(SAMPLE_SEED) < F.col("__rate")))
    return (drawn.groupBy(GROUP, PART, SOURCE)
            .agg(F.first(PART_KEY).alias(PART_KEY), F.count(F.lit(1)).alias("rows"),
                 F.collect_list(F.when(F.col("__drawn"), key)).alias("__sample"),
                 *[agg(F.expr(o)).alias(f"__{name}{i}") for i, o in enumerate(ordinals) if o is not None
                   for name, agg in (("low", F.min), ("high", F.max))]))


def sample_keys(spark: SparkSession, scan: NativeScan, groups: Sequence[RewriteGroup],
                keys: Sequence[SortKeyModel], *, curve: CurveIndex | None = None) -> DataFrame:
    """The rows of the first pass's `__sample` alone (GROUP, PART and the sort keys): about SAMPLES_PER_FILE
    per planned output file, drawn from the native scan before any row is tagged (only the drawn rows join
    the listing). `as_summary` gives them the first pass's shape. A curve layout's key is its index: drawn
    rows of the curve's keys, given the index (`curve`)."""
    rates = {g.group_id: min(1.0, min(SAMPLES_PER_FILE * max(1, g.output_files), MAX_SAMPLE) / max(1, g.rows))
             for g in groups}
    top = max(rates.values())
    names = [key.column for key in keys]
    read = list(curve.keys) if curve is not None else names
    drawn = scan.tagged(scan.rows.select(*read).where(F.rand(SAMPLE_SEED) < F.lit(top)))
    share = literal_frame(spark, [(gid, rate / top) for gid, rate in sorted(rates.items())],
                          [GROUP, "__share"])
    drawn = drawn.join(F.broadcast(share), GROUP).where(F.rand(SAMPLE_SEED + 1) < F.col("__share"))
    if curve is not None:
        drawn = curve.on(drawn)
    return drawn.select(GROUP, PART, *names)


def as_summary(drawn: DataFrame, keys: Sequence[SortKeyModel]) -> DataFrame:
    """Drawn rows (`sample_keys`) as the first pass's summary: per (group, partition) `__sample`, the keys as
    structs k0..kn."""
    key = key_struct(keys)
    return drawn.groupBy(GROUP, PART).agg(F.collect_list(key).alias("__sample"))


def boundaries(spark: SparkSession, summary: DataFrame, files_of: Mapping[tuple[int, str], int],
               keys: Sequence[SortKeyModel], prefix: PrefixPlan | None = None) -> DataFrame:
    """Per (group, partition) that gets n > 1 slots: n - 1 boundaries, the n-quantiles of its sample. A small
    DataFrame (GROUP, PART, __bounds: ordered). With a sort prefix the boundaries are sampled prefixes (longs,
    sorted by value: a row's slot is then the number of boundaries at or below its prefix, one comparison of
    longs each); without one, sort keys (structs k0..kn) sorted in Spark with the sort order's own
    comparison (no value goes through Python, so every type compares exactly as Spark sorts it)."""
    wanted = literal_frame(spark, [(g, p, n) for (g, p), n in sorted(files_of.items()) if n > 1],
                           [GROUP, PART, "__files"])
    n = len(keys)

    def compare(left: Column, right: Column) -> Column:
        lv, rv = [left[f"k{i}"] for i in range(n)], [right[f"k{i}"] for i in range(n)]
        return F.when(before(lv, right, keys), -1).when(before(rv, left, keys), 1).otherwise(0)

    if prefix is not None:
        drawn = (summary.select(GROUP, PART, F.explode("__sample").alias("__s"))
                 .select(GROUP, PART,
                         *[F.col("__s")[f"k{i}"].alias(key.column) for i, key in enumerate(keys)])
                 .select(GROUP, PART, F.expr(prefix.sql()).alias("__p")))
        samples = (drawn.groupBy(GROUP, PART).agg(F.sort_array(F.collect_list("__p")).alias("__sample"))
                   .join(F.broadcast(wanted), [GROUP, PART]))
    else:
        samples = (summary.groupBy(GROUP, PART).agg(F.flatten(F.collect_list("__sample")).alias("__sample"))
                   .join(F.broadcast(wanted), [GROUP, PART])
                   .withColumn("__sample", F.array_sort("__sample", compare)))
    size = F.size("__sample")
    # The j-th boundary (j = 1 .. n-1) is the first sampled key of the j-th quantile.
    positions = F.filter(F.sequence(F.lit(1), F.col("__files")),
                         lambda j: (j < F.col("__files")) & (size > 0))
    picked = F.transform(positions, lambda j: F.element_at("__sample", F.floor(j * size / F.col("__files"))
                                                            .cast("int") + 1))
    return samples.select(GROUP, PART, picked.alias("__bounds"))
