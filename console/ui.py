"""Shared Streamlit helpers for the console pages: the session's operator, time range and cached loads."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import data
from tandem.settings import get_settings

OPERATOR_KEY = "console_operator"
RANGE_KEY = "console_time_range"
DEFAULT_RANGE = "last 24 h"


def operator() -> str:
    return st.session_state.get(OPERATOR_KEY) or "operator"


def time_range() -> str:
    label = st.session_state.get(RANGE_KEY, DEFAULT_RANGE)
    return label if label in data.TIME_RANGES else DEFAULT_RANGE


# The db url is part of the cache key so two databases (tests, or a changed env) never share rows;
# ttl=2 keeps every page current within the app's own settings refresh period.
@st.cache_data(ttl=2, show_spinner=False)
def _requests(db_url: str, range_label: str) -> pd.DataFrame:
    return data.load_requests(since=data.since_for(range_label))


@st.cache_data(ttl=2, show_spinner=False)
def _feedback(db_url: str, range_label: str) -> pd.DataFrame:
    return data.load_feedback(since=data.since_for(range_label))


def requests_frame() -> pd.DataFrame:
    return _requests(get_settings().db_url, time_range())


def feedback_frame() -> pd.DataFrame:
    return _feedback(get_settings().db_url, time_range())


def clear_caches() -> None:
    _requests.clear()
    _feedback.clear()


def format_ms(value: float) -> str:
    return "–" if value != value else f"{value:,.0f} ms"


def format_pct(value: float) -> str:
    return "–" if value != value else f"{value:.1%}"
