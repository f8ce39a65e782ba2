"""A compaction run's steps, in order: prepare (plan and check inputs), the Spark job's submission (`submit`,
with the driver JVM's class archive, `class_archive`), verify, commit (`commit`), record and measure
(`steps`); the same steps as separate Airflow tasks (`runs`) and as one `lakesort compact` process (`driver`).
The run's configuration, the table's spec resolved once at its start and carried by every step (`config`). The
nightly's budget over every table's planned run (`nightly_budget`). The tasks of a DAG run over all its
tables: the runs admitted to Spark; its last one, the leases it left, lakesort's own tables,
the reports (`dag_run`).

May import: layout.compaction.planning, layout.compaction.executor, layout.compaction.integrity,
layout.compaction.plan, layout.upkeep (the lease, staged-file cleanup, maintenance), layout.verify,
layout.metrics, layout.advise (its records, for the budget's predictions), layout.read and the ground floor.
Never Spark or Airflow: the job is spark-submitted.
"""
