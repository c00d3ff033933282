"""The composition root: every long-lived part of a serving process, built once from the settings.

An app process builds one :class:`Runtime` and hands it to its front ends (HTTP API, chat UI); the CLI
builds one per command; a test builds its own with the parts it wants (another KB, no LLM, a database of
its own) instead of patching module globals. Nothing here is a global: two runtimes in one process do not
share state, except the loaded model weights (immutable) and the Prometheus registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chains.answers import Brand
from chains.cache import ResponseCache
from chains.conversation import Conversations, Triggers, rule_skipped
from chains.followups import Suggester
from chains.forecast import FailureForecast
from chains.handoff_webhook import Webhook
from chains.learning import Learning
from chains.llm.base import LLM
from chains.policy import LivePolicy
from chains.ratelimit import RateLimiter
from chains.router_chain import RouterChain
from chains.routers import RouterSource
from chains.rules import RuleBook
from chains.schema import PREPARE_CHANNEL
from chains.service import CUSTOMER_CHANNELS, TandemService
from chains.state import MemoryState, SharedState
from core.encoders import BatchingEncoder, Encoder, load_encoder
from core.pii import mask
from core.policy import Thresholds
from core.settings import Settings, get_settings
from knowledge.base import KnowledgeBase
from knowledge.index import FusionParams
from storage.db import Database, open_database


@dataclass
class Runtime:
    settings: Settings
    db: Database
    encoder: Encoder
    kb: KnowledgeBase
    state: SharedState
    policy: LivePolicy
    routers: RouterSource
    rules: RuleBook
    llm: LLM | None
    chain: RouterChain
    service: TandemService
    limiter: RateLimiter
    problems: list[str] = field(default_factory=list)
    catalog: Any = None  # catalog.live.LiveCatalog: the products the chain's catalog step answers from
    learning: Learning | None = None  # operators' replies proposed as KB answers (chains/learning.py)

    def status(self) -> dict[str, Any]:
        """What /healthz and `tandem doctor` show about the serving parts (the service adds its log backlog)."""
        problems = list(self.problems)
        problems += [p for p in (self.routers.problem, self.rules.problem, getattr(self.state, "problem", "")) if p]
        return {"kb_version": self.kb.version, "kb_entries": len(self.kb), "encoder": self.encoder.describe(),
                "router": self.routers.current().name, "router_version": self.routers.version,
                "settings_version": self.policy.current().version, "state": self.state.status(),
                "cache_entries": self.state.cache_size(), "rate_limits": self.limiter.status(), "problems": problems,
                "llm": self.llm.status() if self.llm is not None else None, **self.service.status()}

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()


def open_kb(settings: Settings, encoder: Encoder) -> KnowledgeBase:
    """The knowledge base of the configured store (TANDEM_CHROMA_URL, else embedded under TANDEM_HOME), with a
    Chinese vector space when TANDEM_ZH_ENCODER names one."""
    from knowledge.chroma_kb import ChromaKnowledgeBase

    languages = {"zh": serving(load_encoder(settings.zh_encoder, settings=settings))} if settings.zh_encoder else {}
    return ChromaKnowledgeBase(encoder, path=None if settings.chroma_url else settings.chroma_path,
                               url=settings.chroma_url, collection=settings.kb_collection,
                               params=FusionParams(starter_examples=settings.kb_starter_examples),
                               encoder_source=lambda: serving(load_encoder(settings.encoder, settings.home, settings=settings)),
                               language_encoders=languages)


def serving(encoder: Encoder) -> Encoder:
    """The encoder as a serving process uses it: on torch, concurrent messages share forward passes (1 thread per
    process, so a batch is the only way to use the pass well); ONNX Runtime already runs concurrent calls in
    parallel, and batching them measured slower (`make bench`, encoder section)."""
    if isinstance(encoder, BatchingEncoder) or encoder.backend != "torch":
        return encoder
    return BatchingEncoder(encoder)


def open_state(settings: Settings) -> SharedState:
    """What replicas share (cache, rate limits): Redis when TANDEM_REDIS_URL is set, else this process's memory."""
    if settings.redis_url:
        from chains.redis_state import RedisState

        return RedisState(settings.redis_url)
    return MemoryState()


def handoff_triggers(settings: Settings) -> Triggers:
    """Which triggers may queue a conversation for a person (TANDEM_HANDOFF_*)."""
    return Triggers(button=settings.handoff_on_button, asked=settings.handoff_on_asked, rule=settings.handoff_on_rule,
                    answer_check=settings.handoff_on_answer_check, vip=settings.handoff_vip,
                    repeat=settings.handoff_on_repeat, anger=settings.handoff_on_anger,
                    legal=settings.handoff_on_legal, complaint=settings.handoff_on_complaint,
                    photo=settings.handoff_on_photo)


def failure_forecast(settings: Settings, db: Database) -> FailureForecast | None:
    """The predicted failure (TANDEM_HANDOFF_ON_PREDICTED_FAILURE), only where a predicted offer hands the
    conversation to a person (the answer-check trigger on), so its LLM answer is written in the background and counted
    (chains/forecast.py)."""
    if not (settings.handoff_on_predicted_failure and settings.handoff_on_answer_check):
        return None
    return FailureForecast(db, settings.handoff_predict_sample, settings.handoff_predict_rate, CUSTOMER_CHANNELS)


def handoff_webhook(settings: Settings) -> Webhook | None:
    """The shop's webhook for operator messages and handoff changes (TANDEM_HANDOFF_WEBHOOK_URL), or None."""
    if not settings.handoff_webhook_url:
        return None
    from core.identity import identity_key

    secret = settings.handoff_webhook_secret or identity_key(settings.identity_secret, settings.home)
    return Webhook(settings.handoff_webhook_url, secret)


def build_runtime(settings: Settings | None = None, *, db: Database | None = None, encoder: Encoder | None = None,
                  kb: KnowledgeBase | None = None, state: SharedState | None = None, llm: LLM | None = None,
                  use_llm: bool = True, router: str | None = None, rules: RuleBook | None = None,
                  catalog: Any = None) -> Runtime:
    """Build every part from ``settings``; any part given is used as is (tests, batch runs)."""
    from chains.bootstrap import prepare_storage

    settings = settings or get_settings()
    db = prepare_storage(settings, db or open_database(settings.db_url))
    encoder = encoder or (kb.encoder if kb is not None
                          else serving(load_encoder(settings.encoder, settings.home, settings=settings)))
    kb = kb if kb is not None else open_kb(settings, encoder)
    if catalog is None:  # the product catalog beside the KB's store; it opens nothing until something is ingested
        from catalog.live import LiveCatalog

        catalog = LiveCatalog(db, encoder, chroma_path=None if settings.chroma_url else settings.chroma_path,
                              url=settings.chroma_url)
    state = state or open_state(settings)
    policy = LivePolicy(db, Thresholds.defaults(settings))
    if llm is None and use_llm:
        from chains.llm.client import LLMClient

        llm = LLMClient(settings, policy.current)
    routers = RouterSource(db, router or settings.router)
    rules = rules or RuleBook(settings.rules_path)
    triggers = handoff_triggers(settings)
    if rules.skip is None:  # a handoff rule whose trigger is switched off is passed over as if it did not match
        rules.skip = rule_skipped(triggers)
    limiter = RateLimiter.from_settings(settings)
    cache = ResponseCache(state, settings.cache_ttl_s, shop_addresses=(settings.support_email,)) \
        if settings.response_cache else None
    chain = RouterChain(kb=kb, router=routers.current, cache=cache,
                        rules=rules, llm=llm, db=db, max_chars=settings.max_message_chars,
                        hold_until_checked=settings.llm_hold_until_checked, llm_budget=limiter.spend_llm_tokens,
                        default_max_tokens=settings.llm_max_tokens,
                        brand=Brand(settings.shop_name, settings.support_email),
                        remember_replaced=settings.cache_replaced_answers,
                        stop_when_broken=settings.llm_stop_when_broken, catalog=catalog,
                        forecast=failure_forecast(settings, db), clarify_margins=settings.clarify_margins)
    followups = Suggester(db, lambda: {e["answer_id"]: (e["title"], e.get("category", "")) for e in kb.entries()},
                          refit_s=settings.followups_refit_s, exclude_channels=(PREPARE_CHANNEL,)) \
        if settings.followups else None
    if followups is not None:
        followups.refit_in_background()  # a fit reads up to 20,000 log rows: start-up does not wait for it
    conversations = Conversations(db, scrub=mask if settings.mask_pii else (lambda text: text),
                                  online_window_s=settings.handoff_online_window_s, triggers=triggers,
                                  notify=handoff_webhook(settings), reply_within_days=settings.handoff_reply_within_days)
    service = TandemService(chain=chain, db=db, policy=policy, mask_pii=settings.mask_pii, followups=followups,
                            conversations=conversations, vip_users=settings.vip_user_set)
    learning = Learning(chain, conversations, policy.current, scrub=conversations.scrub,
                        merge_similarity=settings.handoff_learn_merge_similarity)
    if settings.handoff_learn:  # an operator's reply to a question the KB does not cover: a proposed KB answer
        conversations.learn = learning.propose
    return Runtime(settings=settings, db=db, encoder=encoder, kb=kb, state=state, policy=policy, routers=routers,
                   rules=rules, llm=llm, chain=chain, service=service, limiter=limiter, catalog=catalog,
                   learning=learning)
