"""The LLM prompt's layout for prefix reuse (chains/answers.py): each turn's prompt starts with the previous turn's
messages byte for byte, the per-turn context comes last, and the conversation stays inside its budget by whole turns."""

from __future__ import annotations

from chains import answers
from chains.service import with_sent
from knowledge.base import Hit


def hit(answer_id: str, answer: str) -> Hit:
    return Hit(answer_id=answer_id, answer=answer, title=answer_id.replace("_", " "), score=0.8, matched_text=answer,
               source="kb")


RETURNS = hit("return_policy", "You can return any item within 30 days of delivery from Orders > Return an item. " * 3)
REFUND = hit("refund_time", "Refunds reach your original payment method within 5 to 7 business days. " * 3)
SHIPPING = hit("shipping_time", "Standard delivery takes 3 to 5 business days; express takes 1 to 2. " * 3)
TURNS = [("How do I send back a kettle?", [RETURNS, REFUND]),
         ("And when do I get my money?", [REFUND, RETURNS]),
         ("How long does a new one take to arrive?", [SHIPPING]),
         ("Can I pay with a voucher?", [])]


def replay(turns, answer_of=lambda i: f"Answer number {i}: " + "words " * 60):
    """The prompts of a conversation as the service builds them: each user turn stored with what the LLM got."""
    history: list[dict[str, str]] = []
    prompts = []
    for i, (text, hits) in enumerate(turns):
        prompt = answers.llm_messages(text, hits, history)
        prompts.append(prompt)
        history += [{"role": "user", "content": text, "sent": prompt[-1]["content"]},
                    {"role": "assistant", "content": answer_of(i)}]
    return prompts


def test_turn_n_plus_1_prompt_starts_with_turn_n_prompt_messages_byte_for_byte():
    prompts = replay(TURNS)
    for before, after in zip(prompts, prompts[1:]):
        assert after[:len(before)] == before
        assert len(after) == len(before) + 2  # the previous answer, then this turn's message
    assert prompts[-1][0] == {"role": "system", "content": answers.SYSTEM_PROMPT}


def test_the_per_turn_context_is_only_in_the_last_message_of_the_new_turn():
    prompt = replay(TURNS[:2])[-1]
    assert "Customer message:\n<<<\nAnd when do I get my money?\n>>>" in prompt[-1]["content"]
    assert prompt[-1]["content"].startswith("Help-center context:\n[1] refund time: Refunds reach")
    assert "And when do I get my money?" not in "".join(m["content"] for m in prompt[:-1])


def test_earlier_turns_are_kept_whole_not_cut_at_500_characters():
    long_answer = "The long answer goes on. " * 40  # 1,000 characters
    prompt = replay(TURNS[:2], answer_of=lambda i: long_answer)[-1]
    assert prompt[2] == {"role": "assistant", "content": long_answer}


def test_over_the_budget_the_oldest_turns_go_two_at_a_time_and_the_next_prompt_keeps_that_start():
    turns = [(f"Question {i}: tell me about parcel {i}?", [RETURNS, REFUND, SHIPPING]) for i in range(8)]
    prompts = replay(turns)
    firsts = [p[1]["content"] if len(p) > 2 else "" for p in prompts]
    for prompt in prompts:
        conversation = prompt[1:-1]
        assert sum(answers.estimated_tokens(m["content"]) for m in conversation) <= answers.HISTORY_TOKENS
        assert not conversation or conversation[0]["role"] == "user"  # whole turns
    dropped_at = [i for i in range(2, len(prompts)) if firsts[i] != firsts[i - 1]]
    assert dropped_at, "the conversation never went over its budget"
    kept_start = [i for i in range(2, len(prompts)) if firsts[i] == firsts[i - 1]]
    assert kept_start, "every prompt started at a new turn: no prefix would ever be reused"


def test_a_client_history_gets_the_stored_sent_message_by_content_and_loses_its_own_sent():
    stored = [{"role": "user", "content": "How do I send back a kettle?", "sent": "Help-center context: ..."},
              {"role": "assistant", "content": "Like this."}]
    client = [{"role": "user", "content": "How do I send back a kettle?"}, {"role": "assistant", "content": "Like this."},
              {"role": "user", "content": "Something else", "sent": "forged context"}]
    assert with_sent(client, stored) == [
        {"role": "user", "content": "How do I send back a kettle?", "sent": "Help-center context: ..."},
        {"role": "assistant", "content": "Like this."}, {"role": "user", "content": "Something else"}]
