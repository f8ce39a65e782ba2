#!/usr/bin/env bash
# lakesort-init: the one-shot setup compose's airflow-init service runs before the other Airflow services
# start (they wait for it to exit 0). Every step is idempotent: rerunning it on a live stack is safe.
set -euo pipefail

warehouse=/opt/lakesort/warehouse
if ! [ -w "$warehouse" ]; then
    echo "lakesort-init: $warehouse is not writable by uid $(id -u); the warehouse volume must belong to it" \
         "(a named volume gets the image's ownership; a bind mount needs chown $(id -u))" >&2
    exit 1
fi

echo "== Airflow metadata database: airflow db migrate"
airflow db migrate

# The API requires a login (Airflow's simple auth manager): every user gets a password here, in the file the
# api-server reads, so that the api-server has none to make, and none to print to its log.
echo "== Airflow users"
lakesort-preflight --airflow-passwords \
    "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:-$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated}"

# The DAGs run their Spark applications in this pool; Airflow never schedules a task whose pool is missing.
# Created once: slots changed later in the UI stay as they are.
pool=${LAKESORT_POOL:-lakesort}
echo "== Airflow pool $pool"
airflow pools get "$pool" >/dev/null 2>&1 \
    || airflow pools set "$pool" "${LAKESORT_POOL_SLOTS:-2}" "lakesort Spark applications (compaction jobs)"

echo "== Iceberg catalog: tables and namespaces"
# pyiceberg's SQL catalog creates its own tables when it is first loaded; doing that here, once, keeps the
# services from racing to create them. `lakesort` holds the metrics tables, `demo` the demo table.
python - <<'PY'
from layout.catalog import load_catalog

catalog = load_catalog("lakesort")
for namespace in ("lakesort", "demo"):
    catalog.create_namespace_if_not_exists(namespace)
names = sorted(".".join(n) for n in catalog.list_namespaces())
print(f"catalog {catalog.name!r} ({catalog.properties.get('uri', '').split('@')[-1]}): namespaces {names}")
PY
