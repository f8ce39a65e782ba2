-- Runs once, when the Postgres volume is first initialised (the image's /docker-entrypoint-initdb.d).
-- POSTGRES_DB creates `airflow` (Airflow's metadata); the Iceberg SQL catalog gets its own database, so the
-- two can be backed up, moved or given to different owners separately.
CREATE DATABASE iceberg;
