"""The operators' inbox: conversations waiting for a person (oldest wait first) or held by one; claim, transfer,
release with a summary, the whole history, the handoff packet (unsent suggestions), and a composer pre-filled with
the best suggestion. The same state machine the agent API uses (chains/conversation.py)."""

from __future__ import annotations

import base64

import pandas as pd
import streamlit as st

from chains.conversation import ASKED, HUMAN, WAITING, Conversations, IllegalTransition
from console import ui
from core.pii import mask
from core.settings import get_settings

FLASH_KEY = "inbox_flash"
SELECTED_KEY = "inbox_selected"

conversations = Conversations(ui.db(), scrub=mask if ui.mask_pii() else (lambda text: text))
me = ui.operator()
conversations.seen(me)  # an operator with the inbox open counts as online for the waiting customers
st.title("Inbox")
items = conversations.inbox()
waiting = [item for item in items if item["status"] == WAITING]
st.caption("Conversations handed to a person: waiting (oldest first), then the ones an operator holds. While a person "
           "holds a conversation the bot sends nothing; hand it back with a one-line summary the bot keeps.")
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))
st.metric("Waiting for a person", len(waiting))
if st.button("Refresh", key="inbox_refresh"):
    st.rerun()
if not items:
    st.info("Nobody is waiting for a person.")
    st.stop()

st.dataframe(pd.DataFrame([{"session": i["session_id"], "status": i["status"], "operator": i["operator"],
                            "trigger": i["trigger"], "reason": i["reason"], "waiting_s": i["waiting_s"]}
                           for i in items]), hide_index=True)
ids = [item["session_id"] for item in items]
chosen = st.selectbox("Conversation", ids, key=SELECTED_KEY,
                      format_func=lambda sid: next(f"{i['status']}: {sid[:12]}… ({i['waiting_s']:.0f} s, {i['trigger']})"
                                                   for i in items if i["session_id"] == sid))
item = next(i for i in items if i["session_id"] == chosen)
packet = item["packet"]
if get_settings().handoff_learn and (packet.get("question") or item["trigger"] == ASKED):
    # A reply to a question the KB does not cover becomes a proposed KB answer (the "Learned answers" page); the
    # chain that decides whether the KB covers it is loaded on the first reply that may need it.
    conversations.learn = lambda session_id, operator, text: ui.learning().propose(session_id, operator, text)


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

st.subheader("Conversation")
for message in conversations.history(chosen):
    who = {"customer": "Customer", "assistant": "Bot", "operator": message["author"] or "Operator",
           "note": f"Note ({message['author']})"}.get(message["role"], message["role"])
    st.markdown(f"**{who}:** {message['text']}")

if item["status"] == WAITING:
    if st.button("Claim", key=f"inbox_claim_{chosen}", type="primary"):
        act(lambda: conversations.claim(chosen, me), "Claimed: the bot stays quiet while you hold it.")
elif item["status"] == HUMAN and item["operator"] != me:
    st.info(f"{item['operator']} holds this conversation.")
elif item["status"] == HUMAN:
    text = st.text_area("Reply", value=item["suggestion"], key=f"inbox_composer_{chosen}", height=160,
                        help="Pre-filled with the best suggestion (unsent): edit it before sending.")
    if st.button("Send", key=f"inbox_send_{chosen}", type="primary", disabled=not text.strip()):
        act(lambda: conversations.reply(chosen, me, text), "Sent.")
    cols = st.columns(2)
    to = cols[0].text_input("Transfer to (operator name)", key=f"inbox_transfer_to_{chosen}", max_chars=80)
    if cols[0].button("Transfer", key=f"inbox_transfer_{chosen}", disabled=not to.strip()):
        act(lambda: conversations.transfer(chosen, me, to.strip()), f"Transferred to {to.strip()}.")
    summary = cols[1].text_input("Summary for the bot", key=f"inbox_summary_{chosen}", max_chars=300)
    if cols[1].button("Hand back to the bot", key=f"inbox_release_{chosen}"):
        act(lambda: conversations.release(chosen, me, summary), "Handed back to the bot.")
