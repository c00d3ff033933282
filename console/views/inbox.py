"""The operators' inbox: conversations waiting for a person (oldest wait first) or held by one; claim, transfer,
release with a summary, the whole history, the customer's signed identity and orders, the handoff packet (unsent
suggestions), a composer pre-filled with the best suggestion, and help-center answers to search as canned replies.
The same state machine the agent API uses (chains/conversation.py).

The queue and the conversation refresh by themselves (fragments, every REFRESH_S seconds): a new or changed
conversation reruns the whole page, so the selector and the sidebar's count follow; a new message only redraws the
history, so a reply being typed is left alone."""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any

import pandas as pd
import streamlit as st

from chains.conversation import ASKED, HUMAN, WAITING, Conversations, IllegalTransition
from console import ui
from core.pii import mask
from core.settings import get_settings
from storage.customers import ORDER_COLUMNS

log = logging.getLogger(__name__)
FLASH_KEY = "inbox_flash"
SELECTED_KEY = "inbox_selected"
# How often the queue and the open conversation are read again: a new conversation shows up within this plus a
# page run (issue 57 asks for 5 s).
REFRESH_S = 3
CANNED_HITS = 3

conversations = Conversations(ui.db(), scrub=mask if ui.mask_pii() else (lambda text: text))
me = ui.operator()
st.title("Inbox")
items = conversations.inbox()
st.caption("Conversations handed to a person: waiting (oldest first), then the ones an operator holds. While a person "
           "holds a conversation the bot sends nothing; hand it back with a one-line summary the bot keeps. "
           f"The queue refreshes every {REFRESH_S} s.")
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))


def shape(queue: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What the page's selector and details depend on (not the growing wait times)."""
    return [(i["session_id"], i["status"], i["operator"]) for i in queue]


@st.fragment(run_every=REFRESH_S)
def queue_panel(rendered: list[tuple[str, str, str]]) -> None:
    """The queue, read again every REFRESH_S s; a conversation that came, went or changed hands reruns the page."""
    conversations.seen(me)  # an operator with the inbox open counts as online for the waiting customers
    current = conversations.inbox()
    if shape(current) != rendered:
        st.rerun(scope="app")
    st.metric("Waiting for a person", sum(1 for i in current if i["status"] == WAITING))
    if not current:
        st.info("Nobody is waiting for a person.")
        return
    st.dataframe(pd.DataFrame([{"session": i["session_id"], "status": i["status"], "operator": i["operator"],
                                "customer": i["customer_id"] or "(not signed in)", "trigger": i["trigger"],
                                "reason": i["reason"], "waiting_s": i["waiting_s"]}
                               for i in current]), hide_index=True)


queue_panel(shape(items))
if not items:
    st.stop()

ids = [item["session_id"] for item in items]
chosen = st.selectbox("Conversation", ids, key=SELECTED_KEY,
                      format_func=lambda sid: next(f"{i['status']}: {sid[:12]}… ({i['waiting_s']:.0f} s, {i['trigger']})"
                                                   for i in items if i["session_id"] == sid))
item = next(i for i in items if i["session_id"] == chosen)
packet = item["packet"]
if get_settings().handoff_learn and (packet.get("question") or item["trigger"] == ASKED):
    # A reply to a question the KB does not cover becomes a proposed KB answer (the "Learned answers" page). The
    # chain that decides whether the KB covers it loads on first use (seconds): off the page's thread, so the
    # operator's page does not freeze after Send (the reply is stored and on its way before learning starts).
    def propose_in_background(session_id: str, operator: str, text: str) -> None:
        def propose() -> None:
            try:
                ui.learning().propose(session_id, operator, text)
            except Exception:  # noqa: BLE001 - a proposal is a help; the reply is already sent
                log.exception("proposing a KB answer from the operator's reply failed")

        threading.Thread(target=propose, name="inbox-learn", daemon=True).start()

    conversations.learn = propose_in_background


def act(action, done: str) -> None:
    """Run a state change; one that is not allowed now (another operator was faster) is said, not raised."""
    try:
        action()
    except IllegalTransition as exc:
        st.error(str(exc))
        return
    st.session_state[FLASH_KEY] = done
    st.rerun()


st.subheader("Why the bot handed it over")
st.write(f"**{item['trigger']}**: {item['reason']}")
if item.get("contact_email"):  # left by the customer while nobody was online: the reply may go there
    st.info(f"Reply by email if not here: {item['contact_email']}")
with st.expander("Handoff packet (unsent suggestions)", expanded=True):
    for number, photo in enumerate(packet.get("photos") or [], 1):
        # the customer's photo (a small copy: the upload itself was deleted once read) and what was read from it
        st.markdown(f"**Photo {number} the customer sent**" + (f" ({photo['name']})" if photo.get("name") else ""))
        if str(photo.get("thumbnail", "")).startswith("data:image/"):
            st.image(base64.b64decode(photo["thumbnail"].split(",", 1)[1]), width=240)
        st.caption("Barcode read: " + (", ".join(photo.get("codes") or []) or "none") + " · Text read: "
                   + (photo.get("text") or "none"))
    if packet.get("passages"):
        st.dataframe(pd.DataFrame(packet["passages"])[["answer_id", "title", "score"]], hide_index=True)
    if packet.get("draft"):
        st.markdown("**Draft the bot would have sent (unsent)**")
        st.text(packet["draft"])
    rejected = packet.get("rejected") or {}
    if rejected.get("text"):
        st.markdown("**LLM text that failed its checks (unsent)**")
        st.text(rejected["text"])
        st.json(rejected.get("findings") or [])

st.subheader("The customer")
customer = conversations.customer(chosen)  # what the agent API shows too (storage/customers.py)
if customer is not None:
    st.markdown(f"Signed in as **{customer['id']}** (a customer id the shop's signed token verified).")
    if customer["orders"]:
        st.dataframe(pd.DataFrame(customer["orders"], columns=list(ORDER_COLUMNS)), hide_index=True)
    else:
        st.caption("No orders.")
else:
    st.info("Not signed in: identity unverified, orders not shown.")


@st.fragment(run_every=REFRESH_S)
def history_panel(session_id: str) -> None:
    """The whole conversation, read again every REFRESH_S s: what the customer writes while held shows up."""
    st.subheader("Conversation")
    for message in conversations.history(session_id):
        who = {"customer": "Customer", "assistant": "Bot", "operator": message["author"] or "Operator",
               "note": f"Note ({message['author']})"}.get(message["role"], message["role"])
        st.markdown(f"**{who}:** {message['text']}")


def use_answer(composer: str, answer: str) -> None:
    """A canned reply chosen: into the composer (a callback runs before the composer is drawn again)."""
    st.session_state[composer] = answer


def canned_replies(session_id: str, composer: str) -> None:
    """Help-center answers found by the operator's query, each one click away from the composer (still unsent)."""
    query = st.text_input("Search the help center for a canned reply", key=f"inbox_kb_search_{session_id}",
                          max_chars=300, placeholder="e.g. refund timing")
    if not query.strip():
        return
    hits = ui.knowledge_base().search(query.strip(), k=CANNED_HITS)
    if not hits:
        st.caption("No help-center answer found.")
    for hit in hits:
        with st.container(border=True):
            st.markdown(f"**{hit.title or hit.answer_id}** · `{hit.answer_id}` · score {hit.score:.2f}")
            st.text(hit.answer)
            st.button("Use this answer", key=f"inbox_use_{session_id}_{hit.answer_id}", on_click=use_answer,
                      args=(composer, hit.answer))


history_panel(chosen)

if item["status"] == WAITING:
    if st.button("Claim", key=f"inbox_claim_{chosen}", type="primary"):
        act(lambda: conversations.claim(chosen, me), "Claimed: the bot stays quiet while you hold it.")
elif item["status"] == HUMAN and item["operator"] != me:
    st.info(f"{item['operator']} holds this conversation.")
elif item["status"] == HUMAN:
    composer = f"inbox_composer_{chosen}"
    st.session_state.setdefault(composer, item["suggestion"])  # pre-filled once; the operator's edits are kept
    text = st.text_area("Reply", key=composer, height=160,
                        help="Pre-filled with the best suggestion (unsent): edit it before sending.")
    if st.button("Send", key=f"inbox_send_{chosen}", type="primary", disabled=not text.strip()):
        act(lambda: conversations.reply(chosen, me, text), "Sent.")
    canned_replies(chosen, composer)
    cols = st.columns(2)
    to = cols[0].text_input("Transfer to (operator name)", key=f"inbox_transfer_to_{chosen}", max_chars=80)
    if cols[0].button("Transfer", key=f"inbox_transfer_{chosen}", disabled=not to.strip()):
        act(lambda: conversations.transfer(chosen, me, to.strip()), f"Transferred to {to.strip()}.")
    summary = cols[1].text_input("Summary for the bot", key=f"inbox_summary_{chosen}", max_chars=300)
    if cols[1].button("Hand back to the bot", key=f"inbox_release_{chosen}"):
        act(lambda: conversations.release(chosen, me, summary), "Handed back to the bot.")
