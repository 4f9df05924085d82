"""`metaagentx solve`: the scripted backend end to end (fast) and the embedded model (slow)."""

from __future__ import annotations

import json

import pytest

from metaagentx.cli import main


def _solve_json(capsys, *argv: str) -> dict:
    assert main(["solve", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_solve_template_json(capsys):
    rec = _solve_json(
        capsys, "What is 12 * 13?", "--structure", "debate", "--generation.backend=scripted"
    )
    assert rec["design"]["source"] == "template" and rec["design"]["structure"] == "debate"
    assert rec["outcome"] == "submitted" and rec["fallback"] is None
    # debate of alice and bob over 2 rounds, then the judge: 5 calls
    assert [e["agent"] for e in rec["exchanges"]] == ["alice", "bob", "alice", "bob", "judge"]
    assert rec["mermaid_script"].startswith("graph TD") and "a_judge" in rec["mermaid_calls"]
    assert rec["exchanges"][0]["messages"][-1]["content"] == "What is 12 * 13?"


def test_solve_designed_falls_back_when_rejected(capsys):
    # the scripted backend echoes the designer's request, which holds no script
    rec = _solve_json(capsys, "What is 2 + 3?", "--generation.backend=scripted")
    assert rec["design"]["source"] == "designed" and rec["design"]["rejected"] == "no_script"
    assert rec["fallback"] == "single" and rec["outcome"] == "submitted"
    assert "Design a team" in rec["design"]["designer_text"]


def test_solve_rich_output(capsys):
    assert (
        main(["solve", "What is 2 + 3?", "--structure", "single", "--generation.backend=scripted"])
        == 0
    )
    out = capsys.readouterr().out
    for part in (
        "Question",
        "Script",
        "Mermaid (script)",
        "#1 solver",
        "Final answer",
        "outcome: submitted",
    ):
        assert part in out


@pytest.mark.slow
def test_solve_embedded_model(capsys):
    rec = _solve_json(
        capsys, "What is 12 * 13?", "--designer-tokens", "24", "--max-new-tokens", "24"
    )
    assert rec["model"] == "smollm2-135m"
    assert rec["design"]["source"] == "designed" and rec["design"]["designer_text"] is not None
    assert rec["outcome"] in (
        "submitted",
        "no_answer",
        "runtime_error",
        "budget_exceeded",
        "rejected",
    )
    assert rec["calls"] == len(rec["exchanges"])
    assert all(1 <= e["tokens_out"] <= 24 for e in rec["exchanges"])
    if rec["fallback"]:  # the single template always asks its solver once
        assert [e["agent"] for e in rec["exchanges"]] == ["solver"]


def test_solve_structure_choices_match_the_templates():
    from metaagentx.commands.solve import STRUCTURES
    from metaagentx.mas.templates import TEMPLATES

    assert STRUCTURES == TEMPLATES
