"""The console's Catalog page: the imports with their reports (bad rows by line), the facets, the most-asked products
and the search log with the null-search report, all from what real ingests and real chat turns wrote (the session
database; a runtime over the shared test feed with MiniLM and Chroma). The catalog's rows are removed afterwards, so
no other test's chain finds a catalog."""

from __future__ import annotations

import pytest
from sqlmodel import delete

from catalog.live import LiveCatalog
from catalog.log import CatalogImport, CatalogSearchLog
from catalog.store import CatalogAttribute, CatalogProduct, CatalogState
from chains.schema import ChatRequest
from tests.catalog.shop import write_feed
from tests.conftest import make_runtime
from tests.console.conftest import new_app, sign_in

pytestmark = pytest.mark.slow

BAD_ROW = "X1\tA lamp with no price\t\t\tin_stock"  # line 15 of the feed: the header, 13 products, then this


@pytest.fixture()
def catalog_traffic(settings, db, encoder, demo_kb, tmp_path):
    def wipe() -> None:
        with db.session() as session:
            for table in (CatalogProduct, CatalogAttribute, CatalogState, CatalogImport, CatalogSearchLog):
                session.exec(delete(table))
            session.commit()

    wipe()
    live = LiveCatalog(db, encoder, chroma_path=tmp_path / "chroma")
    feed = write_feed(tmp_path / "feed.tsv", extra_lines=[BAD_ROW])
    live.open().ingest(feed)
    runtime = make_runtime(settings, db, demo_kb, catalog=live)
    try:
        for message in ("a blue throw blanket under $50", "a blue throw blanket under $50",
                        "compare the two cheapest desk lamps", "do you sell bicycles?", "do you sell bicycles?"):
            runtime.service.answer(ChatRequest(message=message, channel="api"))
        yield feed
    finally:
        runtime.close()
        wipe()


def test_the_catalog_page_shows_the_import_report_facets_most_asked_and_null_searches(catalog_traffic, clean_logins):
    at = sign_in(new_app().run())
    assert not at.exception, at.exception
    at = at.switch_page("views/catalog.py").run()
    assert not at.exception, at.exception
    frames = [frame.value for frame in at.dataframe]
    imports = next(f for f in frames if "embedded" in f.columns)
    row = imports.iloc[0]
    assert row["file"] == str(catalog_traffic) and (row["added"], row["bad rows"]) == (13, 1)
    bad = next(f for f in frames if "reason" in f.columns)
    assert list(bad["line"]) == [15]
    facets = [f for f in frames if list(f.columns) == ["value", "products"]]
    category = dict(zip(facets[0]["value"], facets[0]["products"]))
    assert category["Throw Blankets"] == 4 and category["Desk Lamps"] == 3
    asked = next(f for f in frames if "shown" in f.columns)
    assert asked.iloc[0]["product_id"] == "B1" and asked.iloc[0]["top"] == 2  # the blanket search, asked twice
    nulls = next(f for f in frames if "count" in f.columns and "query" in f.columns)
    assert list(nulls["query"]) == ["do you sell bicycles?"] and list(nulls["count"]) == [2]
    log = next(f for f in frames if "top ids" in f.columns)
    assert len(log) == 5 and set(log["kind"]) == {"search", "compare"}
    blanket = log[log["query"] == "a blue throw blanket under $50"].iloc[0]
    assert (blanket["results"], blanket["top ids"], blanket["filters"]) == (1, "B1",
                                                                           "throw blanket · blue · under $50")
