"""A shop's own catalog: a feed nobody wrote the chat's questions for (tests/catalog/data/tea_shop.tsv, 20 products of a
tea shop: teas by kind, teapots, cups, infusers) replaces the demo catalog with `tandem catalog ingest FILE --replace`,
run as a subprocess on a data directory that held the demo catalog; then a search, a fact and a comparison through
`/api/v1/chat` are answered from the new records. Real parts: the `tandem` CLI, MiniLM, Chroma, SQLite, the chain."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
from sqlmodel import select

from catalog.live import LiveCatalog
from catalog.store import CatalogProduct
from tests.api import api_client
from tests.conftest import REPO, VENV_BIN, fresh_db, make_runtime

TEA_FEED = Path(__file__).resolve().parent / "data" / "tea_shop.tsv"
DEMO_FEED = REPO / "catalog" / "demo" / "catalog.tsv"


def _ids(path: Path) -> set[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["id"] for row in csv.DictReader(handle, delimiter="\t")}


def _ingest(home: Path, feed: Path, *extra: str) -> dict:
    done = subprocess.run([str(VENV_BIN / "tandem"), "catalog", "ingest", str(feed), "--json", *extra],
                          env={**os.environ, "TANDEM_HOME": str(home), "TANDEM_DATABASE_URL": "",
                               "TANDEM_CHROMA_URL": ""}, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tea_shop(tmp_path_factory):
    """A data directory that held the demo catalog, then the tea shop's feed ingested over it with --replace."""
    home = tmp_path_factory.mktemp("own-catalog") / "home"
    demo = _ingest(home, DEMO_FEED, "--no-images")
    replaced = _ingest(home, TEA_FEED, "--replace")
    return home, demo, replaced


def test_replace_removes_every_demo_product_and_stores_the_new_feed(tea_shop):
    home, demo, replaced = tea_shop
    demo_ids, tea_ids = _ids(DEMO_FEED), _ids(TEA_FEED)
    assert demo["added"] == len(demo_ids) == 156
    assert (replaced["added"], replaced["removed"], replaced["bad"]) == (len(tea_ids), len(demo_ids), [])
    assert replaced["embedded"] == len(tea_ids) and replaced["version"] == demo["version"] + 1
    db = fresh_db(home)
    with db.session() as session:
        stored = set(session.exec(select(CatalogProduct.id)).all())
    assert stored == tea_ids
    assert (home / "catalog" / "images" / "LK-GLASS-TEAPOT.png").is_file()  # its pictures rendered into the home


def test_a_search_a_fact_and_a_comparison_are_answered_from_the_new_records(tea_shop, settings, encoder, demo_kb):
    home, _, _ = tea_shop
    tea_ids = _ids(TEA_FEED)
    db = fresh_db(home)
    runtime = make_runtime(settings, db, demo_kb, catalog=LiveCatalog(db, encoder, chroma_path=home / "chroma"))
    try:
        with api_client(settings, runtime) as client:
            def ask(message: str) -> dict:
                return client.post("/api/v1/chat", json={"message": message}).json()

            search = ask("a teapot under $40")
            fact = ask("what is the origin of the Darjeeling First Flush?")
            compare = ask("compare the two cheapest teapots")
            gone = ask("a blue throw blanket under $50")
    finally:
        runtime.close()

    assert search["route"] == "catalog"
    assert [c["id"] for c in search["products"]] == ["LK-PORCELAIN-TEAPOT", "LK-GLASS-TEAPOT"]  # best first
    assert {(f["field"], f["label"]) for f in search["filters"]} == {("category", "teapot"), ("price", "under $40")}
    assert all(c["price"] <= 40 for c in search["products"])

    assert fact["route"] == "catalog"
    assert [(s["product_id"], s["field"]) for s in fact["sources"]] == [("LK-DARJEELING-FF-100", "origin")]
    assert "Darjeeling First Flush 100 g: origin is Darjeeling India." in fact["answer"]

    assert compare["route"] == "catalog"
    assert [c["id"] for c in compare["products"]] == ["LK-PORCELAIN-TEAPOT", "LK-GLASS-TEAPOT"]
    table = compare["answer"]
    assert "| capacity | 0.6 L | 1.2 L |" in table and "| material | Porcelain | Borosilicate glass |" in table

    # The demo's blankets are gone: nothing of the kind is shown, and no card is a demo product's
    assert gone["route"] != "catalog" and gone["products"] == []
    assert {c["id"] for r in (search, fact, compare) for c in r["products"]} <= tea_ids
