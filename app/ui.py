"""The customer chat: Gradio Blocks with text, photo and voice input, streamed replies and a route badge.

Handlers are plain (sync) functions and generators, so Gradio runs them in its threadpool and model
calls never block the event loop. The chat event is exposed to `gradio_client` as ``/chat``.

Who the customer is: behind a shop's site, the host page passes the signed-in customer in the
``X-Tandem-Customer`` header, a token the shop's backend signs (core.identity, the same scheme as the HTTP APIs).
In the demo on 127.0.0.1 only, a "signed in as" picker lists the demo customers (``TANDEM_UI_USER_PICKER``). The
order tool shows an order only to its owner, so without either the chat is a guest and order questions are refused.

The customer sees the route badge and one line of why; scores, reasons and the trace are for operators (console).
"""

from __future__ import annotations

import html
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from app import media
from app.access import AccessDenied, Gate
from app.serving import drain, over_limit, pump
from chains.conversation import waiting_line
from chains.ratelimit import LimitKeys
from chains.runtime import Runtime
from chains.schema import HUMAN_ROUTE, ChatRequest, ChatResponse, Decided, Revised
from core.exposure import is_loopback
from core.text import language_of

PLACEHOLDER = ("Hi! Ask about an order, a return or your account. You can also attach a screenshot "
               "or record a voice message.")

CSS = """
.nw-header { display:flex; align-items:center; gap:12px; padding:6px 2px 2px; }
.nw-logo { width:40px; height:40px; border-radius:10px; background:#0f766e; color:#fff; font-weight:700;
           display:flex; align-items:center; justify-content:center; font-size:18px; }
.nw-title { font-size:20px; font-weight:700; margin:0; }
.nw-sub { font-size:13px; opacity:.75; margin:0; }
.route-badge { display:inline-block; margin-top:8px; padding:2px 8px; border-radius:999px; font-size:12px;
               background:#e6f4f1; color:#134e4a; border:1px solid #99d5cb; }
.route-badge.degraded { background:#fff4e5; color:#7c2d12; border-color:#f5c08a; }
details.why { font-size:12px; margin-top:4px; opacity:.85; }
details.why ul { margin:4px 0 0 16px; }
"""

HEADER = """
<div class="nw-header"><div class="nw-logo">{initial}</div>
<div><p class="nw-title">{title}</p>
<p class="nw-sub">Orders, returns, delivery and account help, around the clock.</p></div></div>
"""


# --- rendering ----------------------------------------------------------------------------

SUGGESTED = "suggested:"  # the value prefix of a suggested reply's button


def option_buttons(response: ChatResponse) -> list[dict[str, str]]:
    """The buttons under an answer: the suggested replies (predicted follow-ups)."""
    return [{"label": s.title, "value": SUGGESTED + s.answer_id} for s in response.suggestions]


def route_badge(response: ChatResponse) -> str:
    """The line under every reply: route, degraded or not, latency, sources; plus 'why this route'."""
    total = response.latency_ms.get("total")
    parts = [f"route: {response.route}", "degraded" if response.degraded else "not degraded"]
    if response.route == "llm" and response.served and response.served != "llm":
        parts.insert(1, f"served: {response.served.replace('_', ' ')}")
    if response.fallback:
        parts.append("fallback")
    if total is not None:
        parts.append(f"{total:,.0f} ms")
    if response.sources:
        parts.append("sources: " + ", ".join(s.title for s in response.sources[:3]))
    css = "route-badge degraded" if response.degraded or response.fallback else "route-badge"
    badge = f'<span class="{css}">{html.escape(" · ".join(parts))}</span>'
    return badge + why_details(response)


def why_details(response: ChatResponse) -> str:
    """One line a customer may read. The router's reasons, scores and trace name internals (whether an order number
    exists, another customer's cached question) and stay in the console."""
    reason = response.badge()["reason"]
    return f'<details class="why"><summary>why this route</summary><p>{html.escape(reason)}</p></details>'


def _quote(label: str, text: str) -> str:
    return f"> *{label}:* “{html.escape(text)}”\n\n"


def attachments_preamble(extraction: media.Extraction, typed: str) -> str:
    out = "".join(_quote("I read", t) for t in extraction.read)
    out += "".join(_quote("I heard", t) for t in extraction.heard)
    # When nothing usable remains the service answers with these errors itself; don't say it twice.
    if extraction.errors and (typed.strip() or extraction.texts):
        out += "".join(f"> ⚠️ {html.escape(e)}\n\n" for e in extraction.errors)
    return out


# --- handlers -----------------------------------------------------------------------------

def _files_of(message: Any) -> tuple[str, list[str]]:
    """MultimodalTextbox value (or plain text from an API client) -> (text, file paths)."""
    if isinstance(message, str):
        return message, []
    if not isinstance(message, dict):
        return "", []
    files = []
    for item in message.get("files") or []:
        path = item.get("path") if isinstance(item, dict) else item
        if path:
            files.append(str(path))
    return str(message.get("text") or ""), files


def build_request(reader: media.MediaReader, text: str, files: list[str], session_id: str, customer: str = "",
                  client: str = "", channel: str = "ui") -> tuple[ChatRequest, media.Extraction]:
    try:
        extraction = reader.extract(files)
    except Exception as exc:  # a reader bug must not drop the message: send it on with the error
        extraction = media.Extraction(errors=[f"I could not read your attachment ({exc.__class__.__name__})."])
    request = ChatRequest(message=text, session_id=session_id, user_id=customer, customer=customer, client=client,
                          channel=channel,
                          modality=extraction.modality(text), extracted=extraction.texts,
                          attachment_errors=extraction.errors, photos=extraction.photos)
    return request, extraction


def idle_box() -> gr.MultimodalTextbox:
    """The send arrow back in place of the stop button; keeps whatever the customer is typing."""
    return gr.MultimodalTextbox(submit_btn=True, stop_btn=False)


class ChatHandlers:
    """The chat UI's event handlers over one runtime (fetched per call: it is built after the UI)."""

    def __init__(self, runtime: Callable[[], Runtime], reader: media.MediaReader, gate: Gate):
        self.runtime = runtime
        self.reader = reader
        self.gate = gate
        self._cancels: dict[str, threading.Event] = {}  # session -> the answer now streaming
        self._lock = threading.Lock()

    def who(self, picked: str, request: gr.Request | None) -> str:
        """The signed customer of the host page's header, else the demo picker's choice (loopback only), else ""."""
        header = request.headers.get("x-tandem-customer", "") if request is not None else ""
        if header:
            try:
                return self.gate.customer(header)
            except AccessDenied:  # an expired or forged token: a guest, who can still ask everything else
                return ""
        return (picked or "").strip() if self.picker_shown() else ""

    def picker_shown(self) -> bool:
        settings = self.runtime().settings
        return settings.ui_user_picker and is_loopback(settings.host)

    def address(self, request: gr.Request | None) -> str:
        client = getattr(request, "client", None) if request is not None else None
        peer = getattr(client, "host", "") or ""
        forwarded = request.headers.get("x-forwarded-for", "") if request is not None else ""
        return self.gate.address(peer, forwarded)

    def respond(self, message: Any, history: list | None, session_id: str, request_ids: dict, picked: str = "",
                request: gr.Request | None = None, choice: str = "") -> Iterator[tuple[list, Any, str, dict, dict]]:
        """The chat event: show the user's turn, read attachments, stream the reply, then add the badge. ``choice``:
        the value of a suggested reply's button the customer pressed (the message is then the button's words)."""
        history = list(history or [])
        session_id = session_id or uuid.uuid4().hex
        request_ids = dict(request_ids or {})
        text, files = _files_of(message)
        # While the reply streams, the box's send arrow becomes a stop button (as in ChatInterface).
        busy = gr.MultimodalTextbox(value=None, submit_btn=False, stop_btn=True)
        if text:
            history.append({"role": "user", "content": text})
        for path in files:
            # The file's name, not the file: uploads are deleted once read (app/media.py), so a link would break.
            history.append({"role": "user", "content": f"📎 {Path(path).name}"})
        if not text and not files:
            history.append({"role": "user", "content": "(empty message)"})
        history.append({"role": "assistant", "content": "Reading your attachment…" if files else "…"})
        reply_at = len(history) - 1
        yield history, busy, session_id, request_ids, {}

        cancel = threading.Event()
        with self._lock:
            self._cancels[session_id] = cancel
        # Attachments are read and the service runs to its end in a thread of their own: if the customer
        # presses Stop, Gradio abandons this generator, the cancel event aborts the LLM, and the request row is
        # still written.
        customer = self.who(picked, request)
        keys = LimitKeys(address=self.address(request), customer=customer)
        items = self._turn_in_background(text, files, session_id, customer, keys, cancel, choice)
        first = items.get()
        if not isinstance(first, tuple):  # the turn could not even start; say so and keep the chat usable
            history[reply_at] = {"role": "assistant", "content": "Sorry, something went wrong on our side. "
                                                                 "Please try again or talk to a human."}
            yield history, idle_box(), session_id, request_ids, {}
            return
        chat_request, extraction = first
        preamble = attachments_preamble(extraction, text)
        if preamble:
            history[reply_at] = {"role": "assistant", "content": preamble + "…"}
            yield history, gr.skip(), session_id, request_ids, {}
        answer, final = "", None
        for item in drain(items):
            if isinstance(item, ChatResponse):
                final = item
            elif isinstance(item, Decided):
                continue
            elif isinstance(item, Revised):  # a verified rewrite, or what replaces a failed LLM answer
                answer = item.text
                history[reply_at] = {"role": "assistant", "content": preamble + answer}
                yield history, gr.skip(), session_id, request_ids, {}
            elif isinstance(item, Exception):
                answer += "\n\nSorry, something went wrong on our side. Please try again or talk to a human."
            else:
                answer += item
                history[reply_at] = {"role": "assistant", "content": preamble + answer}
                # gr.skip(): leave the box alone so the customer can already type the next message
                yield history, gr.skip(), session_id, request_ids, {}
        with self._lock:
            self._cancels.pop(session_id, None)
        if final is None:
            history[reply_at] = {"role": "assistant", "content": preamble + (answer or "Sorry, no answer came back.")}
            yield history, idle_box(), session_id, request_ids, {}
            return
        if final.route == HUMAN_ROUTE and not final.answer:  # a person holds the conversation: the bot says nothing
            history.pop(reply_at)
            yield history, idle_box(), session_id, request_ids, final.badge()
            return
        request_ids[reply_at] = final.request_id
        # an acknowledged (or refused) email address already says what the line would
        line = waiting_line(final.handoff, language_of(text)) \
            if final.handoff and final.served not in ("contact_email", "contact_invalid") else ""
        history[reply_at] = {"role": "assistant", "content": preamble + final.answer + (f"\n\n*{line}*" if line else "")
                             + "\n\n" + route_badge(final),
                             # the suggested replies as buttons under it (chatbot.option_select -> choose)
                             **({"options": buttons} if (buttons := option_buttons(final)) else {})}
        details = {**final.badge(), "extracted": extraction.texts, "attachment_errors": extraction.errors,
                   "modality": chat_request.modality}
        yield history, idle_box(), session_id, request_ids, details

    def _turn_in_background(self, text: str, files: list[str], session_id: str, customer: str, keys: LimitKeys,
                            cancel: threading.Event, choice: str = "") -> queue.Queue:
        """The queue receives (request, extraction), then text pieces, the final ChatResponse, then END (an
        exception in their place if the service breaks its promise not to raise: the customer is told)."""
        items: queue.Queue = queue.Queue()

        def turn() -> Iterator[Any]:
            runtime = self.runtime()
            limited = ChatRequest(message=text, session_id=session_id, customer=customer, client=keys.client,
                                  channel="ui", modality="text+attachment" if files else "text")
            if (refused := over_limit(runtime, keys, limited)) is not None:
                yield limited, media.Extraction()
                yield refused.answer
                yield refused
                return
            chat_request, extraction = build_request(self.reader, text, files, session_id, customer, keys.client)
            if choice.startswith(SUGGESTED):  # a suggested reply's button
                chat_request = chat_request.model_copy(update={"suggestion": choice.removeprefix(SUGGESTED)})
            yield chat_request, extraction
            yield from runtime.service.stream(chat_request, cancel)

        pump(turn, items.put, "tandem-ui-turn")
        return items

    def choose(self, choice: str, history: list | None, session_id: str, request_ids: dict, picked: str = "",
               request: gr.Request | None = None) -> Iterator[tuple[list, Any, str, dict, dict]]:
        """A suggested reply's button (value ``suggested:<answer id>``): its title is sent as the customer's turn,
        with the id as the clicked suggestion."""
        history = list(history or [])
        offered: list[dict] = next((m["options"] for m in reversed(history) if isinstance(m, dict) and m.get("options")),
                                   [])
        label = next((o.get("label", "") for o in offered if o.get("value") == choice), "") or choice
        yield from self.respond(label, history, session_id, request_ids, picked, request, choice=choice)

    def option_picked(self, history: list | None, session_id: str, request_ids: dict, picked: str,
                      selected: gr.SelectData, request: gr.Request | None = None
                      ) -> Iterator[tuple[list, Any, str, dict, dict]]:
        """The browser's click on a suggested reply's button (Chatbot options) -> :meth:`choose`."""
        yield from self.choose(str(selected.value), history, session_id, request_ids, picked, request)

    def stop(self, session_id: str) -> gr.MultimodalTextbox:
        """The Stop button: abort the answer now streaming in this session (the LLM request too)."""
        with self._lock:
            cancel = self._cancels.pop(session_id or "", None)
        if cancel is not None:
            cancel.set()
        return idle_box()

    def rate(self, data: gr.LikeData, request_ids: dict, comment: str) -> tuple[str, str]:
        """Thumbs up/down on a reply -> svc.feedback, with the optional comment."""
        index = data.index[0] if isinstance(data.index, (list, tuple)) else data.index
        request_id = (request_ids or {}).get(index)
        if data.liked in (True, "Like"):
            rating = 1
        elif data.liked in (False, "Dislike"):
            rating = -1
        else:  # the thumb was taken back; nothing to record
            return "", comment
        if not request_id:
            return "That message cannot be rated (it has no answer id yet).", comment
        self.runtime().service.feedback(request_id, rating, (comment or "").strip())
        return ("Thanks, glad it helped." if rating > 0 else "Thanks for telling us; we use this to improve."), ""

    def talk_to_human(self, session_id: str, request_ids: dict, comment: str, picked: str = "",
                      request: gr.Request | None = None) -> tuple[str, str, str]:
        session_id = session_id or uuid.uuid4().hex
        last = (request_ids or {}).get(max(request_ids)) if request_ids else ""
        service = self.runtime().service
        ticket = service.handoff(session_id, self.who(picked, request), last or "", (comment or "").strip())
        line = waiting_line(service.handoff_view(session_id))
        return (f"A member of our team will take over this conversation (ticket #{ticket}). "
                "You can keep writing here meanwhile." + (f" {line}" if line else "")), session_id, ""

    def deliver(self, session_id: str, history: list | None, seen: dict) -> tuple[Any, Any]:
        """Every second: what a person wrote into this conversation since ``seen`` (and that one has joined), added
        to the open chat without the customer writing anything."""
        conversations = self.runtime().service.conversations if session_id else None
        if conversations is None:
            return gr.skip(), gr.skip()
        seen = dict(seen or {})
        new = conversations.messages(session_id, after=int(seen.get("id", 0)))
        view = conversations.view(conversations.state(session_id))
        holder = (view or {}).get("operator") or ""
        shown = [{"role": "assistant", "content": f"**{m.get('author') or 'Our team'}:** {m['text']}"}
                 for m in new if m["role"] == "operator"]
        if holder and holder != seen.get("holder"):
            shown.insert(0, {"role": "assistant", "content": f"*{waiting_line(view)}*"})
        if not new and holder == seen.get("holder", ""):
            return gr.skip(), gr.skip()
        seen.update(holder=holder, **({"id": max(int(m["id"]) for m in new)} if new else {}))
        return (list(history or []) + shown if shown else gr.skip()), seen

    def demo_users(self) -> list[str]:
        """The customers of the demo orders, for the "signed in as" picker."""
        from sqlmodel import select

        from storage.tables import Order

        try:
            with self.runtime().db.session() as session:
                return sorted(set(session.exec(select(Order.user_id)).all()))
        except Exception:  # the picker is a convenience; a missing table must not break the page
            return []


def build_ui(runtime: Callable[[], Runtime], reader: media.MediaReader, gate: Gate, shop: str) -> gr.Blocks:
    """The Blocks app (not launched), titled for ``shop`` (TANDEM_SHOP_NAME). Theme and CSS are given where it is
    mounted (Gradio 6)."""
    handlers = ChatHandlers(runtime, reader, gate)
    title = f"{shop} support"
    with gr.Blocks(title=title, fill_height=True) as demo:
        session_id = gr.State("")
        request_ids = gr.State({})  # chatbot message index -> request id, for thumbs and hand-off
        with gr.Row():
            gr.HTML(HEADER.format(initial=html.escape(shop[:1].upper()), title=html.escape(title)))
            picked = gr.Dropdown(label="Signed in as (demo customers)", choices=[""], value="",
                                 allow_custom_value=False, elem_id="signed-in-as", scale=0, min_width=220)
        chatbot = gr.Chatbot(label=title, elem_id="chat", height=520, placeholder=PLACEHOLDER,
                             feedback_options=("Like", "Dislike"), buttons=["copy"], scale=1)
        box = gr.MultimodalTextbox(file_types=["image", "audio"], sources=["upload", "microphone"],
                                   file_count="multiple", show_label=False, elem_id="message",
                                   placeholder="Type your question, attach a screenshot or record a voice message…")
        with gr.Row():
            comment = gr.Textbox(label="Comment for your thumbs up/down, or a note for our team (optional)",
                                 max_lines=2, scale=4, elem_id="comment")
            human = gr.Button("Talk to a human", scale=1, elem_id="handoff")
        notice = gr.Markdown(elem_id="notice")
        # A person's replies reach the open chat by themselves: the page asks every second (a database read).
        delivered = gr.State({})
        ticker = gr.Timer(1.0)
        details = gr.JSON(visible=False, label="last answer")

        def picker() -> Any:
            try:
                shown = handlers.picker_shown()
            except Exception:  # still starting
                shown = False
            return gr.Dropdown(choices=["", *handlers.demo_users()] if shown else [""], visible=shown)

        demo.load(picker, None, [picked], api_visibility="private")
        sent = box.submit(handlers.respond, [box, chatbot, session_id, request_ids, picked],
                          [chatbot, box, session_id, request_ids, details], api_name="chat")
        # Stop abandons the stream on screen and cancels the answer; the service still logs the turn.
        box.stop(handlers.stop, [session_id], [box], cancels=[sent], queue=False, api_visibility="private")
        chatbot.like(handlers.rate, [request_ids, comment], [notice, comment], api_visibility="private")
        # Suggested replies' buttons: the browser clicks one; API clients call /choose with its value.
        chatbot.option_select(handlers.option_picked, [chatbot, session_id, request_ids, picked],
                              [chatbot, box, session_id, request_ids, details], api_visibility="private")
        choice = gr.Textbox(visible=False, elem_id="choice")
        choice.submit(handlers.choose, [choice, chatbot, session_id, request_ids, picked],
                      [chatbot, box, session_id, request_ids, details], api_name="choose")
        human.click(handlers.talk_to_human, [session_id, request_ids, comment, picked], [notice, session_id, comment],
                    api_name="handoff")
        ticker.tick(handlers.deliver, [session_id, chatbot, delivered], [chatbot, delivered], api_visibility="private",
                    show_progress="hidden")
    return demo


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="teal", secondary_hue="slate")
