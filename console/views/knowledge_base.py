"""Knowledge base: entries, upload and ingest, version, which answers get hits and which queries found nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from console import stats, ui
from core.settings import get_settings
from knowledge.base import KnowledgeBase

settings = get_settings()
st.title("Knowledge base")
frame = ui.requests_frame()

kb: KnowledgeBase | None
try:
    kb = ui.knowledge_base()
except Exception as exc:  # any failure to open the store must not take the console down
    kb = None
    st.error(f"Cannot open the knowledge base: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

hits = stats.source_hits(frame)
if kb is not None:
    version_column, outside_column, starter_column = st.columns(3)
    kb_stats = kb.stats()
    version_column.metric("KB version", str(kb.version))
    outside_column.metric("Out-of-scope examples", kb_stats.get("out_of_scope_examples", 0),
                          help="query,answer_id rows with answer_id out_of_scope: messages the FAQ does not answer; "
                               "the router reads how close a message comes to them")
    starter_column.metric("Starter out-of-scope examples", kb_stats.get("starter_examples", 0),
                          help="Tandem's own examples of what a shop's FAQ does not answer (advice, comparisons, "
                               "judgement calls, other companies' services, chit-chat), less those this KB answers; "
                               "TANDEM_KB_STARTER_EXAMPLES=false turns them off")
    search = st.text_input("Search entries", key="kb_search")
    try:
        entries = pd.DataFrame(kb.entries(search=search or None))
    except Exception as exc:
        entries = pd.DataFrame()
        st.error(f"Listing entries failed: {exc}")
    if not entries.empty and "answer_id" in entries:
        entries = entries.merge(hits, on="answer_id", how="left").fillna({"hits": 0})
        entries["hits"] = entries["hits"].astype(int)
    st.caption(f"{len(entries):,} entries" + (f" matching '{search}'" if search else ""))
    st.dataframe(entries, hide_index=True)

    st.subheader("Add content")
    uploads = st.file_uploader("CSV (answer_id,answer[,title,category,tags] or query,answer_id; answer_id out_of_scope "
                               "for a message the FAQ does not answer), Markdown FAQ or text",
                               type=["csv", "md", "markdown", "txt"], accept_multiple_files=True, key="kb_upload")
    if uploads and st.button("Ingest", type="primary", key="kb_ingest"):
        too_big = [u.name for u in uploads if u.size > settings.max_upload_mb * 1024 * 1024]
        if too_big:
            st.error(f"Over the {settings.max_upload_mb} MB upload limit: {', '.join(too_big)}")
        else:
            # The KB API reports progress only to a terminal, so the bar advances per file.
            bar = st.progress(0.0, text="ingesting…")
            for done, upload in enumerate(uploads):
                bar.progress(done / len(uploads), text=f"ingesting {upload.name} ({done + 1}/{len(uploads)})…")
                with tempfile.TemporaryDirectory() as folder:
                    # Keep the uploaded file name: the ingester detects the format from suffix and header.
                    path = Path(folder) / Path(upload.name).name
                    path.write_bytes(upload.getvalue())
                    try:
                        report = kb.ingest([path], progress=False)
                    except Exception as exc:  # a broken file is reported, the other files still go in
                        st.error(f"{upload.name}: ingest failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
                        continue
                summary = report.summary() if callable(getattr(report, "summary", None)) else str(report)
                st.success(f"{upload.name}: {summary}")
                bad = getattr(report, "bad", None)
                if bad:
                    st.dataframe(pd.DataFrame([b.model_dump() if hasattr(b, "model_dump") else b for b in bad]),
                                 hide_index=True)
            bar.progress(1.0, text="done")
            ui.clear_caches()

st.subheader("Most cited answers")
if hits.empty:
    st.caption("No logged request cited a knowledge-base answer in this time range.")
else:
    st.bar_chart(hits.head(20).set_index("answer_id")["hits"], horizontal=True)
    st.dataframe(hits.head(100), hide_index=True)

st.subheader("Gaps to fill")
threshold = st.slider("Weak match below kb_top", 0.0, 1.0, 0.5, 0.05, key="kb_gap_threshold")
gaps = stats.knowledge_gaps(frame, threshold)
st.caption(f"{len(gaps):,} requests found nothing usable or escalated with a weak best match.")
st.dataframe(gaps.head(200), hide_index=True)
