"""The bodies of the handoff API: a customer's conversation (`/api/v1/sessions/...`) and the operators' inbox
(`/api/v1/inbox...`), request and response side by side. FastAPI validates against these and `/api/docs` shows them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, StrictStr, model_serializer


class HandoffOut(BaseModel):
    """Where the conversation stands with a person: waiting (place in the queue, operators online, the expected wait
    from recent pick-up times, null when there are none) or held by one (their name)."""

    model_config = ConfigDict(extra="allow")

    status: Literal["waiting", "human"]
    position: int | None = Field(None, description="1 for the conversation waiting longest; null unless waiting")
    operators_online: int | None = Field(None, description="operators who used the inbox in the last minutes")
    expected_wait_s: float | None = Field(None, description="median pick-up time of the recent claims; null: none yet")
    operator: str | None = Field(None, description="the person holding the conversation (status human)")
    trigger: str = Field("", description="what handed it over: button | asked | rule | answer_check | vip")
    since: str | None = Field(None, description="when it was queued (ISO 8601)")
    triggered: bool | None = Field(None, description="this message handed it over (chat answers only)")

    @model_serializer(mode="wrap")
    def _nulls_kept(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A null here says something ("no wait to quote yet", "not waiting"): kept even where the API drops nulls.
        data = handler(self)
        for name in ("position", "operators_online", "expected_wait_s", "operator"):
            data.setdefault(name, getattr(self, name))
        return data


class MessageOut(BaseModel):
    id: int
    role: Literal["customer", "assistant", "operator"]
    text: str
    created_at: str
    author: str | None = Field(None, description="the operator who wrote it")


class MessagesOut(BaseModel):
    messages: list[MessageOut]
    handoff: HandoffOut | None = None


class OperatorIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    operator: StrictStr = Field("", max_length=80, description="who acts; default: the API key's name")


class ReplyIn(OperatorIn):
    text: StrictStr = Field(min_length=1, max_length=4000)


class ReleaseIn(OperatorIn):
    summary: StrictStr = Field("", max_length=1000, description="one line the bot keeps in the conversation")


class TransferIn(OperatorIn):
    to: StrictStr = Field(min_length=1, max_length=80, description="the operator who takes the conversation over")


class InboxItemOut(BaseModel):
    session_id: str
    status: Literal["waiting", "human"]
    reason: str = Field(description="why the conversation was handed over (masked)")
    trigger: str
    waiting_s: float = Field(description="seconds since it was queued")
    suggestion: str = Field(description="the best unsent suggestion: the help-center draft, else the rejected LLM "
                            "text; never sent by itself")
    operator: str = ""
    user_id: str = Field("", description="the label the caller sent; never an identity")
    customer_id: str | None = Field(None, description="the customer a signed token verified; null: not signed in "
                                    "(identity unverified)")
    request_id: str = ""
    contact_email: str = Field("", description="the address the customer left for the reply while nobody was online; "
                               "empty: none")
    waiting_since: str | None = None
    claimed_at: str | None = None
    packet: dict[str, Any] = Field(default_factory=dict, description="why the bot escalated, the KB passages it "
                                   "found with their scores, its draft, the LLM text that failed its checks with the "
                                   "findings: all unsent (`unsent: true`)")


class InboxOut(BaseModel):
    conversations: list[InboxItemOut]
    count: int = Field(description="conversations waiting for a person")


class ConversationOut(BaseModel):
    session_id: str
    status: Literal["bot", "waiting", "human", "returned"]
    operator: str = ""
    message_id: int | None = Field(None, description="the stored reply (reply only)")


class ProposalOut(BaseModel):
    """An operator's reply to a question the knowledge base did not cover, proposed as a KB answer."""

    id: int
    status: Literal["proposed", "approved", "rejected"]
    question: str = Field(description="the customer's wording (masked)")
    answer: str = Field(description="the operator's reply (masked), the proposed answer")
    operator: str
    session_id: str
    created_at: str | None = None
    merge_into: str = Field("", description="the existing answer this near-duplicates: approving adds the question "
                            "to it as an example question; empty: a new answer")
    similarity: float = 0.0
    coverage: dict[str, Any] = Field(default_factory=dict, description="why the KB did not cover the question")
    answer_id: str = Field("", description="the KB answer it became once approved")
    decided_by: str = ""
    check: dict[str, Any] = Field(default_factory=dict, description="after approval, the question re-asked: route, "
                                  "cites, answered_by_small")


class ProposalsOut(BaseModel):
    proposals: list[ProposalOut]


class ApproveIn(OperatorIn):
    answer: StrictStr = Field("", max_length=4000, description="the approver's edit of the answer; empty: as proposed")
