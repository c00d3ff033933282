"""The product catalog (issue 59): each ingest with its report, the facets, the most-asked products, the search log
and the null-search report (the queries that found nothing), from the catalog's tables (catalog/report.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from catalog import report
from console import data, ui

database = ui.db()
report.ensure_tables(database)
since = data.since_for(ui.time_range())

st.title("Product catalog")

st.subheader("Imports")
st.caption("Every `tandem catalog ingest` run, newest first, with its report; a bad row is listed by its line.")
imports = report.imports(database)
if not imports:
    st.info("No catalog was ever ingested. Ingest a Merchant Center or Shopify feed with `tandem catalog ingest FILE`.")
else:
    st.dataframe(pd.DataFrame([{"when": i.created_at, "file": i.file, "format": i.format, "replace": i.replace,
                                "added": i.added, "updated": i.updated, "unchanged": i.unchanged,
                                "removed": i.removed, "embedded": i.embedded, "bad rows": len(i.bad or []),
                                "version": i.version} for i in imports]),
                 hide_index=True, key="catalog_imports",
                 column_config={"when": st.column_config.DatetimeColumn("when", format="YYYY-MM-DD HH:mm:ss")})
    bad = [{"import": f"{i.created_at:%Y-%m-%d %H:%M:%S} {i.file}", "line": b.get("line"), "reason": b.get("reason")}
           for i in imports for b in (i.bad or [])]
    if bad:
        st.markdown("**Bad rows** (not stored; the feed's other rows were)")
        st.dataframe(pd.DataFrame(bad), hide_index=True, key="catalog_bad_rows")

st.subheader("Facets")
facets = report.facets(database)
columns = st.columns(len(facets))
for column, (name, values) in zip(columns, facets.items()):
    with column:
        st.markdown(f"**{name}** ({len(values)})")
        st.dataframe(pd.DataFrame({"value": list(values), "products": list(values.values())}), hide_index=True,
                     key=f"catalog_facet_{name}")

st.subheader("Most-asked products")
st.caption(f"The products the catalog's answers showed in {ui.time_range()}: how many answers each led, and how many "
           "it was in.")
asked = report.most_asked(database, since)
if asked:
    st.dataframe(pd.DataFrame(asked, columns=["product_id", "title", "price", "top", "shown"]), hide_index=True,
                 key="catalog_most_asked")
else:
    st.info("No product was shown in this time range.")

st.subheader("Searches that found nothing")
st.caption("The null-search report: product messages the catalog had nothing for (a kind the shop does not sell, a "
           "barcode no product has, nothing to compare), grouped by their text, most frequent first.")
nulls = report.null_searches(database, since)
if nulls:
    st.dataframe(pd.DataFrame(nulls, columns=["query", "count", "kind", "filters", "last_seen"]), hide_index=True,
                 key="catalog_null_searches",
                 column_config={"last_seen": st.column_config.DatetimeColumn("last seen", format="YYYY-MM-DD HH:mm")})
else:
    st.info("Every product message in this time range found something.")

st.subheader("Search log")
log = report.searches(database, since)
st.caption(f"{len(log):,} catalog searches in {ui.time_range()}, newest first (at most 500): the message (personal "
           "data masked), its kind, the filters applied, how many products the answer showed and which, and the "
           "constraint relaxed to find any.")
if log:
    st.dataframe(pd.DataFrame([{"when": s.created_at, "query": s.query, "kind": s.kind, "filters": s.filters,
                                "results": s.results, "top ids": ", ".join(map(str, s.top_ids or [])),
                                "relaxed": s.relaxed} for s in log]), hide_index=True, key="catalog_search_log",
                 column_config={"when": st.column_config.DatetimeColumn("when", format="YYYY-MM-DD HH:mm:ss"),
                                "query": st.column_config.TextColumn("query", width="large")})
