"""Operator console entry script: `streamlit run console/app.py` (or `tandem console`).

Nothing but the sign-in form exists before sign-in: the only navigation registered then is the hidden
sign-in page, so no page, page name or data is reachable by URL. Pages live in ``console/views/``
rather than ``pages/`` because Streamlit would list a ``pages/`` folder on its own before any session
has called ``st.navigation``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent
# `streamlit run` puts console/ itself on sys.path, where our module names (data, stats, ui, cli ...)
# would shadow same-named top-level modules; import them as the `console` package instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import streamlit as st  # noqa: E402

from console import auth, ui  # noqa: E402
from core.errors import TandemError  # noqa: E402

SIGNED_IN_KEY = "console_signed_in"

st.set_page_config(page_title="Tandem console", page_icon=":material/support_agent:", layout="wide")


def sign_in_page() -> None:
    st.title("Tandem operator console")
    with st.form("sign_in", clear_on_submit=False):
        operator = st.text_input("Operator name", value="operator", max_chars=80, key="sign_in_operator")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in")
    if not submitted:
        return
    try:
        outcome = auth.sign_in(ui.db().init(), password, operator.strip() or "operator")
    except TandemError as exc:
        st.error(str(exc))
        return
    if outcome.ok:
        st.session_state[SIGNED_IN_KEY] = True
        st.session_state[ui.OPERATOR_KEY] = operator.strip() or "operator"
        st.rerun()
    st.error(outcome.message)


def sign_out() -> None:
    for key in (SIGNED_IN_KEY, ui.OPERATOR_KEY):
        st.session_state.pop(key, None)


if not st.session_state.get(SIGNED_IN_KEY):
    st.navigation([st.Page(sign_in_page, title="Sign in", url_path="signin")], position="hidden").run()
    st.stop()

PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page("views/request_log.py", title="Requests", icon=":material/list:"),
    st.Page("views/tuning.py", title="Tuning", icon=":material/tune:"),
    st.Page("views/what_if.py", title="What-if replay", icon=":material/science:"),
    st.Page("views/knowledge_base.py", title="Knowledge base", icon=":material/menu_book:"),
    st.Page("views/router_training.py", title="Router", icon=":material/alt_route:"),
    st.Page("views/alerts.py", title="Alerts", icon=":material/notifications:"),
    st.Page("views/autopilot.py", title="Autopilot", icon=":material/smart_toy:"),
]
page = st.navigation(PAGES)
with st.sidebar:
    st.caption(f"Signed in as **{ui.operator()}**")
    st.selectbox("Time range", list(ui.data.TIME_RANGES), index=list(ui.data.TIME_RANGES).index(ui.DEFAULT_RANGE),
                 key=ui.RANGE_KEY)
    st.button("Sign out", on_click=sign_out)
try:
    page.run()
except TandemError as exc:
    st.error(str(exc))
