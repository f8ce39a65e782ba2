"""The catalogs the registry configures tables in (`registry.catalog_names`), which the report task's
housekeeping and the report read: pyiceberg's default one, and each one a YAML spec or a namespace default
names, not only the specs'."""

from __future__ import annotations

import logging

from layout.registry import catalog_names, default_catalog


def test_every_configured_source_names_its_catalogs(iceberg_catalog, registry, caplog):
    assert default_catalog() == iceberg_catalog.name
    assert catalog_names() == [iceberg_catalog.name]  # t.events' spec names the default one
    (registry / "_defaults.yaml").write_text('defaults:\n  - match: "eu.*"\n    catalog: europe\n'
                                             '    sort: {keys: [{column: k}]}\n')
    (registry / "us.yaml").write_text("table: us.t\ncatalog: america\nowner: {name: T, "
                                      "email: t@example.com}\n")
    (registry / "broken.yaml").write_text("table: [unclosed\n")  # logged, left out
    with caplog.at_level(logging.WARNING):
        assert catalog_names() == sorted({iceberg_catalog.name, "america", "europe"})
    assert "broken.yaml" in caplog.text
