"""The chat page's once-a-second delivery (app/ui.py ChatHandlers.deliver): a person's joining and replies are added to
the customer's open chat without the customer writing, each once."""

from __future__ import annotations

import gradio as gr

from app.ui import ChatHandlers
from tests.conftest import fresh_db, make_runtime


def test_an_operators_reply_appears_in_the_open_chat_once_without_the_customer_writing(settings, demo_kb, tmp_path):
    runtime = make_runtime(settings, fresh_db(tmp_path), demo_kb)
    try:
        handlers = ChatHandlers(lambda: runtime, reader=None, gate=None)  # type: ignore[arg-type]  # not used here
        conversations = runtime.service.conversations
        shown = [{"role": "user", "content": "talk to a human"}, {"role": "assistant", "content": "a colleague…"}]
        nothing = handlers.deliver("chat-1", shown, {})
        assert all(isinstance(part, type(gr.skip())) for part in nothing)  # nobody holds it: the chat is left alone
        conversations.hand_off("chat-1", "asked", "asked")
        conversations.claim("chat-1", "dana")
        conversations.reply("chat-1", "dana", "Hi, Dana here. How can I help?")
        history, seen = handlers.deliver("chat-1", shown, {})
        assert [m["content"] for m in history[2:]] == [
            "*dana from our team has joined the conversation.*", "**dana:** Hi, Dana here. How can I help?"]
        again = handlers.deliver("chat-1", history, seen)
        assert all(isinstance(part, type(gr.skip())) for part in again)  # each message once
    finally:
        runtime.close()
