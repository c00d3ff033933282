"""Bench traffic from the public test files (reporting only), and messages that exercise each route."""

from __future__ import annotations

from bench.common import rng
from offline import datasets as ds
from offline.datasets import Query

# Alice owns these demo orders (knowledge/demo/orders.csv): the order tool answers her, nobody else.
TOOL_USER = "alice"
TOOL_MESSAGES = ("Where is my order NW-104233?", "What is the status of order NW-104871?",
                 "track my package NW-104233 please", "has NW-104871 shipped yet?",
                 "When will order NW-104233 arrive?")


def mixed_queries(n: int, exclude: frozenset[str] | set[str] = frozenset()) -> list[Query]:
    """`n` distinct test queries, interleaved from every dataset so each slice looks like mixed traffic."""
    pools = [ds.bitext("test"), ds.clinc("test"), ds.banking("test"), ds.hint3("test"), ds.tau_bench(("test",))]
    shuffle = rng()
    for pool in pools:
        shuffle.shuffle(pool)
    seen = set(exclude)
    out: list[Query] = []
    index = 0
    while len(out) < n and any(index < len(pool) for pool in pools):
        for pool in pools:
            if index < len(pool) and len(out) < n:
                text = " ".join(pool[index].text.split())
                if text and text.lower() not in seen:
                    seen.add(text.lower())
                    out.append(pool[index])
        index += 1
    return out


def limited(rows: list[Query], limit: int | None) -> list[Query]:
    """A deterministic random subset that keeps the in-scope / out-of-scope mix of the file."""
    if limit is None or len(rows) <= limit:
        return rows
    picked = rows[:]
    rng().shuffle(picked)
    return picked[:limit]
