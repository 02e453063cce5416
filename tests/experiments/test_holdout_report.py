"""experiments/benchmarks/holdout_report.py: issue T's floor verdict per landscape, each half apart."""

from __future__ import annotations

import pytest

from tests.experiments.conftest import load_script


@pytest.fixture(scope="module")
def report():
    return load_script("holdout_report")


def _row(landscape: str, strategy: str, p: tuple[float, float, float], **extra) -> dict:
    return {"landscape": landscape + ".json", "strategy": strategy, "batch": 1, "configs": 10, "repeats": 100,
            "at": {n: {"p_within_2pct": v} for n, v in zip(("20", "30", "50"), p, strict=True)}, **extra}


def _rows(name: str, default: tuple, tpe: tuple) -> list[dict]:
    return [_row(name, "default", (0.0, 0.0, 0.0)), _row(name, "default", default, kb=True),
            _row(name, "bayes", tpe), _row(name, "bayes:cmaes", (0.1, 0.1, 0.1)),
            _row(name, "evolution", (0.2, 0.2, 0.2)), _row(name, "random", (0.1, 0.2, 0.3))]


def test_the_floor_fails_where_the_default_is_more_than_the_slack_below_the_best_sampler(report) -> None:
    run = {"meta": {"commit": "abc"}, "results": _rows("a", (0.90, 0.97, 1.0), (0.92, 0.99, 1.0))
           + _rows("b", (0.80, 0.97, 1.0), (0.92, 0.99, 1.0))}
    out = report.build(run, {"design": ["a"], "held_out": ["b"]}, None)
    a, b = out["landscapes"]["a"], out["landscapes"]["b"]
    assert a["kb"] and a["default"]["20"] == 0.90  # the campaign's default: the knowledge-base row
    assert a["floor"] and not b["floor"] and b["floor_holds"] == {"20": False, "30": True, "50": True}
    assert b["best_floor_by"]["20"] == "TPE"
    assert out["halves"] == {"design": ["a"], "held_out": ["b"], "earlier": []}
    text = report.render({**out, "meta": {"holdout": "h.json", "holdout_date": "d", "run": "r", "command": "c"}})
    assert "## Held-out half" in text and "| b | 100, kb | 0.80! / 0.97 / 1.00 |" in text


def test_runs_of_disjoint_seeds_pool_into_one_of_their_repeats_and_overlapping_ones_are_refused(report) -> None:
    a = {"meta": {"seed": 0, "repeats": 100, "commit": "abc"}, "results": _rows("x", (0.8, 0.9, 1.0), (0.9, 0.9, 1.0))}
    b = {"meta": {"seed": 100, "repeats": 100, "commit": "abc"}, "results": _rows("x", (0.9, 1.0, 1.0), (0.9, 0.9, 1.0))}
    pooled = report.pool([b, a])
    row = next(r for r in pooled["results"] if r["strategy"] == "default" and r.get("kb"))
    assert row["repeats"] == 200 and row["at"]["20"]["p_within_2pct"] == pytest.approx(0.85)
    assert pooled["meta"]["repeats"] == 200 and pooled["meta"]["seed"] == 0
    with pytest.raises(SystemExit, match="overlapping seeds"):
        report.pool([a, a])


def test_a_half_measured_after_the_other_on_the_same_seeds_joins_it_and_pools_with_more_seeds(report) -> None:
    """The design half is run first, the held-out half once the design is committed, both on seeds 0..99; a second
    run of seeds 100..199 on the closest calls pools with them, seed for seed."""
    design = {"meta": {"seed": 0, "repeats": 100, "commit": "abc"}, "results": _rows("x", (0.8, 0.9, 1.0), (0.9, 0.9, 1.0))}
    held = {"meta": {"seed": 0, "repeats": 100, "commit": "def"}, "results": _rows("y", (0.7, 0.9, 1.0), (0.9, 0.9, 1.0))}
    more = {"meta": {"seed": 100, "repeats": 100, "commit": "def"}, "results": _rows("x", (1.0, 1.0, 1.0), (0.9, 0.9, 1.0))}
    pooled = report.pool([held, more, design])
    rows = {(r["landscape"], r["strategy"], bool(r.get("kb"))): r for r in pooled["results"]}
    assert rows[("x.json", "default", True)]["repeats"] == 200
    assert rows[("x.json", "default", True)]["at"]["20"]["p_within_2pct"] == pytest.approx(0.9)
    assert rows[("y.json", "default", True)]["repeats"] == 100 and rows[("y.json", "default", True)]["commit"] == "def"
    assert rows[("x.json", "bayes", False)]["commit"] == "abc+def"
