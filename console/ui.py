"""Shared Streamlit helpers for the console pages: the session's operator, time range and cached loads."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from console import data
from core.errors import TandemError
from core.settings import get_settings
from knowledge.base import KnowledgeBase
from ops import logframes
from storage.db import Database, open_database

OPERATOR_KEY = "console_operator"
RANGE_KEY = "console_time_range"
DEFAULT_RANGE = "last 24 h"


def db() -> Database:
    """The database of this console (one engine per URL and process)."""
    return open_database(get_settings().db_url)


@st.cache_resource(show_spinner="Opening the knowledge base…")
def _knowledge_base(chroma_url: str, chroma_path: str, collection: str, encoder: str) -> KnowledgeBase:
    from chains.runtime import open_kb
    from core.encoders import load_encoder

    settings = get_settings()
    return open_kb(settings, load_encoder(encoder, settings=settings))


def knowledge_base() -> KnowledgeBase:
    """The same knowledge base the app serves (opened once per console process; it follows other writers)."""
    s = get_settings()
    return _knowledge_base(s.chroma_url, str(s.chroma_path), s.kb_collection, s.encoder)


@st.cache_resource(show_spinner="Loading the chain…")
def _learning(db_url: str, chroma_url: str, chroma_path: str, collection: str, encoder: str) -> Any:
    from chains.runtime import build_runtime

    settings = get_settings().model_copy(update={"followups": False})  # the console serves no customer
    return build_runtime(settings, db=db(), kb=knowledge_base(), use_llm=False).learning


def learning() -> Any:
    """The learning loop (chains/learning.py) over this console's database and knowledge base, with the chain that
    re-asks an approved answer's question (no LLM: it routes, it does not generate); built on first use."""
    s = get_settings()
    return _learning(s.db_url, s.chroma_url, str(s.chroma_path), s.kb_collection, s.encoder)


def mask_pii() -> bool:
    """Whether customer text on these pages is masked (TANDEM_MASK_PII; on unless the deployment keeps it)."""
    return get_settings().mask_pii


def operator() -> str:
    """The signed-in account's name, the author of every change a page saves (set only by a verified sign-in,
    never by a widget: the sign-in form's name field has a key of its own)."""
    name = st.session_state.get(OPERATOR_KEY)
    if not name:
        raise TandemError("not signed in: sign in again")
    return str(name)


def time_range() -> str:
    label = st.session_state.get(RANGE_KEY, DEFAULT_RANGE)
    return label if label in data.TIME_RANGES else DEFAULT_RANGE


# The db url is part of the cache key so two databases (tests, or a changed env) never share rows;
# ttl=2 keeps every page current within the app's own settings refresh period.
@st.cache_data(ttl=2, show_spinner=False)
def _requests(db_url: str, range_label: str) -> pd.DataFrame:
    return logframes.load_requests(open_database(db_url), since=data.since_for(range_label))


@st.cache_data(ttl=2, show_spinner=False)
def _feedback(db_url: str, range_label: str, mask_pii: bool) -> pd.DataFrame:
    return logframes.load_feedback(open_database(db_url), since=data.since_for(range_label), mask_pii=mask_pii)


def requests_frame() -> pd.DataFrame:
    return _requests(get_settings().db_url, time_range())


def feedback_frame() -> pd.DataFrame:
    return _feedback(get_settings().db_url, time_range(), mask_pii())


def clear_caches() -> None:
    _requests.clear()
    _feedback.clear()


def format_ms(value: float) -> str:
    return "–" if value != value else f"{value:,.0f} ms"


def format_pct(value: float) -> str:
    return "–" if value != value else f"{value:.1%}"
