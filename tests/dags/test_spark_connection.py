"""Which Spark master the provider's hook resolves from a connection (apache-airflow-providers-apache-spark
as locked), for the connections the README documents. Connections come from AIRFLOW_CONN_* variables, as
in the docker deployment and the tests' Airflow home.

Known pitfall (DESIGN.md; apache/airflow #46169, #56453): a connection in URI form keeps only the host in
`host` and the scheme in `conn_type`. The hook rebuilds `spark://host:port` from them when there is a port,
but a URI without a port (`spark://spark-master`) resolves to the bare host `spark-master`, not a master
URL: the scheme is lost. The JSON form with the scheme inside the host resolves the same in every case.
"""

from __future__ import annotations

import json

import pytest


def resolve(monkeypatch, value: str | dict, conn_id: str = "spark_test", **hook_kwargs) -> dict:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}",
                       value if isinstance(value, str) else json.dumps(value))
    return SparkSubmitHook(conn_id=conn_id, **hook_kwargs)._resolve_connection()


@pytest.mark.parametrize(("host", "master"),
                         [("local[2]", "local[2]"), ("local[*]", "local[*]"), ("local", "local")])
def test_local(monkeypatch, host, master):
    conn = resolve(monkeypatch, {"conn_type": "spark", "host": host})
    assert conn["master"] == master and conn["deploy_mode"] is None


def test_standalone_json(monkeypatch):
    # docker/compose.yaml's spark_default
    conn = resolve(monkeypatch, {"conn_type": "spark", "host": "spark://spark-master", "port": 7077,
                                 "extra": {"deploy-mode": "client"}})
    assert conn["master"] == "spark://spark-master:7077" and conn["deploy_mode"] == "client"
    assert conn["spark_binary"] == "spark-submit"


def test_yarn_json(monkeypatch):
    conn = resolve(monkeypatch, {"conn_type": "spark", "host": "yarn",
                                 "extra": {"deploy-mode": "cluster", "queue": "etl"}})
    assert (conn["master"], conn["deploy_mode"], conn["queue"]) == ("yarn", "cluster", "etl")


def test_kubernetes_json(monkeypatch):
    # A k8s master needs apache-airflow-providers-cncf-kubernetes (not in this environment: the hook then
    # fails with a NameError); stand in for its client to check the master the hook builds.
    from airflow.providers.apache.spark.hooks import spark_submit

    monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)
    conn = resolve(monkeypatch, {"conn_type": "spark", "host": "k8s://https://k8s.example.com", "port": 6443,
                                 "extra": {"deploy-mode": "cluster", "namespace": "lakesort"}})
    assert conn["master"] == "k8s://https://k8s.example.com:6443"
    assert (conn["deploy_mode"], conn["namespace"]) == ("cluster", "lakesort")


def test_uri_form_with_port_is_rebuilt(monkeypatch):
    conn = resolve(monkeypatch, "spark://spark-master:7077?deploy-mode=client")
    assert conn["master"] == "spark://spark-master:7077" and conn["deploy_mode"] == "client"


def test_uri_form_without_port_loses_the_scheme(monkeypatch):
    """The pitfall as it reproduces with the locked provider: not a master URL any more."""
    assert resolve(monkeypatch, "spark://spark-master")["master"] == "spark-master"
    # ... while the JSON form keeps it (spark-submit then uses the standalone default port 7077).
    assert resolve(monkeypatch, {"conn_type": "spark", "host": "spark://spark-master"})["master"] == "spark://spark-master"

