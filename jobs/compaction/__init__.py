"""The Spark side of a compaction: what jobs/compact.py runs in the Spark driver, part by part.

    run           the parts in order in one Spark application (compact_groups), the manifest
    job_plan      the plan as the job uses it, its table schema decoded once (JobPlan), passed to every part
    read          the planned files read as Iceberg defines their rows, each row tagged
    sample        the sort key's sample and the file boundaries
    placement     each row's slot (a piece of an output file)
    fingerprints  the input's fingerprint, observed in the write's read pass
    write         slots, tasks and piece sizes; curves; finishing the staged files in the executors
    readback      the staged files read back from storage: rows and fingerprint per file
    schema        the table's schema as Spark types, with Iceberg field ids
    frames        literal frames and the sort order as Spark expressions
    columns       the names of the columns the job adds beside the table's (slot, prefix, curve index...)

May import: pyspark and `layout` (its pure planning of slots, prefixes, memory and figures; its fingerprints;
the executors' reader and staging), never Airflow. `layout` never imports this package: it runs without Spark.

What runs in the executors is either `layout`'s (shipped as the `layout` zip, or installed) or a function
nested in this package's code, which Spark's cloudpickle sends by value; jobs/compact.py registers the package
to be pickled by value, so that a module-level function of it would travel too.
"""
