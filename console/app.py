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
from streamlit import runtime  # noqa: E402

from console import accounts, auth, ui  # noqa: E402
from core.errors import TandemError  # noqa: E402
from core.settings import get_settings  # noqa: E402

SIGNED_IN_KEY = "console_signed_in"  # how this session signed in: "account" or "shared"
INBOX_COUNT_REFRESH_S = 5  # issue 57: new conversations show up within 5 s, with a count in the sidebar

st.set_page_config(page_title="Tandem console", page_icon=":material/support_agent:", layout="wide")


def listen_host() -> str:
    """The address this console listens on: under a real Streamlit server its server.address (what `tandem console`
    passes from --host or TANDEM_HOST; a bare `streamlit run` leaves it unset and then listens on every interface),
    else TANDEM_HOST (AppTest stands a mock in for the runtime and listens nowhere)."""
    if runtime.exists() and type(runtime.get_instance()) is runtime.Runtime:
        return str(st.get_option("server.address") or "0.0.0.0")
    return get_settings().host


def client_address() -> str:
    """The browser's address for the sign-in throttle; Streamlit reports none on localhost (and AppTest a mock)."""
    try:
        address = st.context.ip_address
    except Exception:  # no client context
        address = None
    return address if isinstance(address, str) and address else auth.LOCAL_ADDRESS


def refuse_exposed_default_password() -> None:
    if problem := auth.exposure_problem(ui.db().init(), listen_host()):
        st.error(f"The console will not start: {problem} (a bare `streamlit run` listens on every interface "
                 "unless given --server.address 127.0.0.1).")
        st.stop()


def sign_in_page() -> None:
    st.title("Tandem operator console")
    database = ui.db().init()
    shared = not accounts.has_accounts(database)
    if shared and not get_settings().console_password:
        st.warning("No operator accounts and TANDEM_CONSOLE_PASSWORD is empty, so nobody can sign in. Add an account "
                   "with `tandem operators add NAME`.")
    with st.form("sign_in", clear_on_submit=False):
        # Only the name an account signs in with: after sign-in the audit author is the verified account.
        name = st.text_input("Operator name", value=auth.SHARED_NAME if shared else "", max_chars=80,
                             key="sign_in_operator")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in")
    if not submitted:
        return
    try:
        outcome = auth.sign_in(database, name, password, client_address())
    except TandemError as exc:
        st.error(str(exc))
        return
    if outcome.ok:
        st.session_state[SIGNED_IN_KEY] = outcome.via
        st.session_state[ui.OPERATOR_KEY] = outcome.operator
        st.rerun()
    st.error(outcome.message)


def waiting_for_a_person() -> int:
    """Conversations waiting in the inbox: the count the sidebar shows by its name."""
    from chains.conversation import WAITING, Conversations

    try:
        return len(Conversations(ui.db()).queue((WAITING,)))
    except Exception:  # a database without the tables yet: the page itself reports it
        return 0


@st.fragment(run_every=INBOX_COUNT_REFRESH_S)
def waiting_count() -> None:
    """The sidebar's count of conversations waiting for a person, read again every few seconds on every page (the
    Inbox entry's own name follows at the next page run)."""
    st.metric("Waiting for a person", waiting_for_a_person(), help="Conversations in the inbox that no operator has "
              f"claimed yet; read every {INBOX_COUNT_REFRESH_S} s.")


def sign_out() -> None:
    for key in (SIGNED_IN_KEY, ui.OPERATOR_KEY):
        st.session_state.pop(key, None)


refuse_exposed_default_password()
# A session ends when its account is disabled or removed, or (shared password) once accounts exist.
if st.session_state.get(SIGNED_IN_KEY) and not auth.still_signed_in(
        ui.db(), str(st.session_state.get(ui.OPERATOR_KEY) or ""), str(st.session_state[SIGNED_IN_KEY])):
    sign_out()
if not st.session_state.get(SIGNED_IN_KEY):
    st.navigation([st.Page(sign_in_page, title="Sign in", url_path="signin")], position="hidden").run()
    st.stop()

PAGES = [
    st.Page("views/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    # Second: Streamlit folds the list after ten pages, and customers wait on this one.
    st.Page("views/inbox.py", title=f"Inbox ({waiting_for_a_person()})", icon=":material/support_agent:"),
    st.Page("views/request_log.py", title="Requests", icon=":material/list:"),
    st.Page("views/recurring.py", title="Recurring questions", icon=":material/repeat:"),
    st.Page("views/prepared.py", title="Prepared answers", icon=":material/bolt:"),
    st.Page("views/tuning.py", title="Tuning", icon=":material/tune:"),
    st.Page("views/what_if.py", title="What-if replay", icon=":material/science:"),
    st.Page("views/knowledge_base.py", title="Knowledge base", icon=":material/menu_book:"),
    st.Page("views/router_training.py", title="Router", icon=":material/alt_route:"),
    st.Page("views/catalog.py", title="Catalog", icon=":material/inventory_2:"),
    st.Page("views/alerts.py", title="Alerts", icon=":material/notifications:"),
    st.Page("views/autopilot.py", title="Autopilot", icon=":material/smart_toy:"),
    st.Page("views/proposals.py", title="Learned answers", icon=":material/school:"),
]
page = st.navigation(PAGES)
with st.sidebar:
    st.caption(f"Signed in as **{ui.operator()}**")
    waiting_count()
    st.selectbox("Time range", list(ui.data.TIME_RANGES), index=list(ui.data.TIME_RANGES).index(ui.DEFAULT_RANGE),
                 key=ui.RANGE_KEY)
    st.button("Sign out", on_click=sign_out)
try:
    page.run()
except TandemError as exc:
    st.error(str(exc))
