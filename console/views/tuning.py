"""Tuning: edit the live thresholds (validated, with a required reason), version history and rollback."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from console import ui
from core.policy import CHECK_ACTIONS, CHECK_KINDS, Thresholds
from storage import policy_store

AUTOTUNE_AUTHOR = "autotune"  # ops.tuner.AUTHOR: automatic versions sit in the same history as manual ones

FIELDS = {
    "route_threshold": ("Route threshold τ", "Send to the LLM when p_llm ≥ τ."),
    "rewrite_threshold": ("Rewrite threshold", "Small-tier drafts scoring below this are rewritten by the LLM."),
    "cache_similarity": ("Cache similarity", "Cosine similarity needed for a semantic cache hit."),
    "overload_enter": ("Overload enter", "LLM load at which answers degrade to the small tier."),
    "overload_exit": ("Overload exit", "LLM load at which degrading stops (must be below enter)."),
}


CHECK_LABELS = {"url": "Unsupported link", "email": "Unsupported email", "phone": "Unsupported phone",
                "amount": "Unsupported price/amount", "percent": "Unsupported percentage",
                "duration": "Unsupported duration", "order": "Unknown order number", "truncated": "Cut off",
                "repeated": "Repeated lines", "language": "Wrong language", "empty": "Empty reply",
                "prompt_echo": "Repeats the system prompt"}


def bounds(name: str) -> tuple[float, float]:
    """The ge/le range declared on Thresholds, so the form can never offer what save() would refuse."""
    low, high = 0.0, 1.0
    for rule in Thresholds.model_fields[name].metadata:
        low = float(getattr(rule, "ge", low))
        high = float(getattr(rule, "le", high))
    return low, high


def validation_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'values'}: {e['msg']}" for e in exc.errors())
    return str(exc)


st.title("Tuning")
current = policy_store.current(ui.db())
st.caption(f"Live version {current.version}. The running app picks up a save within about 2 seconds.")
FLASH_KEY = "tuning_flash"
if FLASH_KEY in st.session_state:  # the outcome of the save or rollback that triggered this rerun
    st.success(st.session_state.pop(FLASH_KEY))

with st.form("tuning"):
    values: dict[str, Any] = {}
    cols = st.columns(len(FIELDS))
    for col, (name, (label, help_text)) in zip(cols, FIELDS.items()):
        low, high = bounds(name)
        values[name] = col.number_input(label, min_value=low, max_value=high, value=float(getattr(current, name)),
                                        step=0.01, format="%.3f", help=help_text, key=f"tune_{name}")
    st.markdown("**Answer check**: what happens to an LLM answer with an unsupported claim or another problem "
                "(remove the claim, answer with the help center's draft, or hand the conversation to a human).")
    actions: dict[str, str] = {}
    action_cols = st.columns(4)
    for index, kind in enumerate(CHECK_KINDS):
        actions[kind] = action_cols[index % 4].selectbox(
            CHECK_LABELS.get(kind, kind), CHECK_ACTIONS, index=CHECK_ACTIONS.index(current.check_actions[kind]),
            key=f"check_{kind}")
    values["check_actions"] = actions
    reason = st.text_input("Why this change? (required)", key="tune_reason", max_chars=300)
    submitted = st.form_submit_button("Save new version", type="primary")
if submitted:
    if not reason.strip():
        st.error("Say why you change the thresholds: the reason is kept in the history.")
    elif (all(abs(values[k] - float(getattr(current, k))) < 1e-9 for k in FIELDS)
          and values["check_actions"] == current.check_actions):
        st.warning("Nothing changed: the values equal the live version.")
    else:
        try:
            saved = policy_store.save(ui.db(), values, author=ui.operator(), reason=reason.strip())
        except (ValidationError, ValueError) as exc:
            st.error(f"Not saved: {validation_message(exc)}")
        else:
            st.session_state[FLASH_KEY] = f"Saved version {saved.version}."
            st.rerun()

st.subheader("History")
rows = policy_store.history(ui.db(), limit=50)
if not rows:
    st.caption("No versions yet: the defaults from settings are live.")
else:
    table = pd.DataFrame([{"version": r.version, "when": r.created_at, "who": r.author,
                           "change": "automatic" if r.author == AUTOTUNE_AUTHOR else "manual", "why": r.reason,
                           **{k: r.values.get(k) for k in FIELDS}} for r in rows])
    st.dataframe(table, hide_index=True)
    st.caption("Roll back = save an older version's values as a new version.")
    for row in rows[1:]:
        cols = st.columns([1, 6, 2])
        cols[0].write(f"v{row.version}")
        cols[1].write(f"{row.author} · {row.reason or '–'} · τ={row.values.get('route_threshold')}")
        if cols[2].button(f"Roll back to v{row.version}", key=f"rollback_{row.version}"):
            try:
                restored = policy_store.rollback(ui.db(), int(row.version or 0), author=ui.operator())
            except (ValidationError, ValueError) as exc:
                st.error(f"Rollback failed: {validation_message(exc)}")
            else:
                st.session_state[FLASH_KEY] = f"Version {row.version} restored as version {restored.version}."
                st.rerun()
