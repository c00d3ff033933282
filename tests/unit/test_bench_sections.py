"""`make bench SECTIONS=...`: which sections a run takes, and how a section run's figures merge into the report."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from bench import run


def test_a_named_section_runs_with_the_sections_it_needs_in_run_order():
    assert run.chosen_sections(["prefix", "routing"]) == ["routing", "prefix"]
    assert run.chosen_sections(["app"]) == ["routing", "policies", "app"]
    with pytest.raises(SystemExit, match="unknown bench section"):
        run.chosen_sections(["no-such-section"])


def test_every_timed_step_of_the_bench_belongs_to_a_section():
    source = inspect.getsource(run)
    steps = set(re.findall(r'_section\(result, "(\w+)"', source)) | {run.section_step(s) for s in ("prefix", "mixed", "idle")}
    assert len(steps) > 10 and steps <= set(run.STEPS), steps - set(run.STEPS)
    assert set(run.STEPS.values()) <= set(run.SECTIONS)


def test_a_section_run_replaces_its_own_figures_and_keeps_the_others(tmp_path):
    previous = {"date": "2026-12-04T21:14:57+00:00", "routing": {"p50": 1.0}, "routing_overhead_ms": {"p50": 2.0},
                "prefix_reuse": {"conversations": 200}, "section_s": {"routing": 12.9, "prefix_reuse": 2281.6},
                "errors": {"prefix_reuse": "TimeoutError: old", "replicas": "RuntimeError: kept"},
                "sections": {"routing": {"date": "2026-12-04T21:15:00+00:00", "wall_s": 20.0, "quick": False}}}
    result = {"date": "2026-12-07T15:00:00+00:00", "prefix_reuse": {"conversations": 4},
              "section_s": {"export": 0.1, "prefix_reuse": 190.0},
              "sections": {"prefix": {"date": "2026-12-07T15:00:01+00:00", "wall_s": 250.0, "quick": False}}}
    merged = run.merged(previous, result, ["prefix"])
    assert merged["prefix_reuse"] == {"conversations": 4}
    assert merged["routing"] == {"p50": 1.0} and merged["routing_overhead_ms"] == {"p50": 2.0}
    assert merged["section_s"] == {"routing": 12.9, "prefix_reuse": 190.0, "export": 0.1}
    assert merged["errors"] == {"replicas": "RuntimeError: kept"}  # the rerun section's old failure is gone
    assert set(merged["sections"]) == {"routing", "prefix"}
    assert merged["sections"]["routing"]["date"].startswith("2026-12-04")
    assert merged["sections"]["prefix"]["wall_s"] == 250.0
    assert merged["date"] == result["date"] and merged["quick"] is False
    json.dumps(merged)  # what _write stores


def test_a_rerun_section_whose_figure_is_missing_now_drops_the_old_one():
    """A section that failed this time must not leave last week's figure looking current."""
    previous = {"replicas": {"ratio": 1.3}, "sections": {"replicas": {"date": "old", "wall_s": 70.0, "quick": False}}}
    result = {"errors": {"replicas": "RuntimeError: no nginx"},
              "sections": {"replicas": {"date": "new", "wall_s": 3.0, "quick": False}}}
    merged = run.merged(previous, result, ["replicas"])
    assert "replicas" not in merged and merged["errors"] == {"replicas": "RuntimeError: no nginx"}
    assert merged["sections"]["replicas"]["date"] == "new"


def test_figures_of_a_report_older_than_the_section_records_keep_that_reports_date():
    previous = {"date": "2026-12-04T21:14:57+00:00", "machine": {"cores": 2, "cpu": "AMD EPYC"},
                "encoders": {"served": "onnx-int8"}, "replicas": {"ratio": 1.3}}
    result = {"date": "2026-12-07T15:00:00+00:00", "routing": {"p50": 1.0},
              "sections": {"routing": {"date": "2026-12-07T15:00:01+00:00", "wall_s": 130.0, "quick": False}}}
    sections = run.merged(previous, result, ["routing"])["sections"]
    assert set(sections) == {"encoders", "replicas", "routing"}
    assert sections["encoders"]["date"] == sections["replicas"]["date"] == previous["date"]
    assert sections["encoders"]["wall_s"] is None and sections["routing"]["wall_s"] == 130.0
