"""`tandem kb tune` and `tandem route-batch`'s tuning, run as a user runs them: real contrastive fine-tuning of
MiniLM on a 20-answer part of the demo KB (about 20 s on 2 cores), in a data directory of the test's own."""

from __future__ import annotations

import json
import re
from pathlib import Path

from offline.datasets import read_csv
from tests.conftest import DEMO, run_cli, write_csv

QUERIES = ("query_id,query\nq1,how long does shipping take\nq2,can i send back shoes that dont fit\n"
           "q3,which of your laptops is best for gaming and why\n")


def _demo_part(folder: Path, answers: int = 20) -> tuple[Path, Path]:
    """The demo KB's first ``answers`` answers and their example questions, as CSVs a shop would ingest."""
    answer_rows = read_csv(DEMO / "answers.csv")[:answers]
    kept = {row["answer_id"] for row in answer_rows}
    question_rows = [row for row in read_csv(DEMO / "questions.csv") if row["answer_id"] in kept]
    return write_csv(folder / "answers.csv", answer_rows), write_csv(folder / "questions.csv", question_rows)


def _kb_version(env: dict[str, str]) -> str:
    result = run_cli("kb", "version", env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split()[-1]


def test_kb_tune_serves_a_tuned_encoder_route_batch_reuses_it_for_the_same_files_and_reset_restores_the_base(
        tmp_path):
    home = tmp_path / "home"
    env = {"TANDEM_HOME": str(home), "TANDEM_DATABASE_URL": f"sqlite:///{tmp_path / 'tandem.db'}",
           "TANDEM_ENCODER": "auto"}
    answers, questions = _demo_part(tmp_path)
    ingest = run_cli("kb", "ingest", str(answers), str(questions), "--no-progress", env=env)
    assert ingest.returncode == 0, ingest.stderr
    base_version = _kb_version(env)

    tuned = run_cli("kb", "tune", "--no-progress", env=env, timeout=900)
    assert tuned.returncode == 0, tuned.stderr
    folders = sorted((home / "encoders").glob("minilm-kb-*"))
    assert len(folders) == 1 and (folders[0] / "config.json").is_file()
    active = json.loads((home / "encoders" / "active.json").read_text())
    assert active["folder"] == str(folders[0])
    # The fine-tuning has to have learned something: its own questions find their answer more often.
    before, after = map(float, re.search(r"own questions ([\d.]+) -> ([\d.]+)", tuned.stdout).groups())
    assert after > before
    # The KB was re-embedded by the tuned encoder: its version (the cache's key too) names that encoder.
    tuned_version = _kb_version(env)
    assert tuned_version != base_version and active["version"].startswith(tuned_version.split("-")[-1])

    # route-batch builds its throwaway KB from the same files as the product does: same content, same encoder.
    queries = tmp_path / "queries.csv"
    queries.write_text(QUERIES)

    def route_batch(*flags: str) -> tuple[str, list[dict]]:
        out = tmp_path / "out.jsonl"
        result = run_cli("route-batch", "--kb", str(answers), "--questions", str(questions),
                         "--queries", str(queries), "--out", str(out), "--no-progress", *flags, env=env, timeout=900)
        assert result.returncode == 0, result.stderr
        return result.stderr, [json.loads(line) for line in out.read_text().splitlines()]

    tuned_log, tuned_routes = route_batch()
    assert f"reusing the encoder tuned on this KB content ({folders[0].name})" in tuned_log
    assert sorted((home / "encoders").glob("minilm-kb-*")) == folders and _kb_version(env) == tuned_version
    assert tuned_routes[0]["route"] == "small" and tuned_routes[0]["answer_id"] == "shipping_times"
    base_log, base_routes = route_batch("--no-tune")
    assert "--no-tune: routing with the base MiniLM" in base_log
    assert [r["query_id"] for r in base_routes] == ["q1", "q2", "q3"]
    # Another encoder, other distances: the evidence of the same messages changes.
    assert [r["dense_top"] for r in base_routes] != [r["dense_top"] for r in tuned_routes]

    reset = run_cli("kb", "tune", "--reset", env=env)
    assert reset.returncode == 0, reset.stderr
    assert not (home / "encoders" / "active.json").exists() and folders[0].is_dir()
    assert _kb_version(env) == base_version
