"""Templates, answer extraction and Mermaid rendering (pure functions, no sandbox)."""

from __future__ import annotations

import re

import pytest

from metaagentx.mas.api import extract_answer, extract_code, majority_vote
from metaagentx.mas.render import mermaid_from_calls, mermaid_from_script, node_id
from metaagentx.mas.script import check_script
from metaagentx.mas.structure import classify_structure
from metaagentx.mas.templates import TEMPLATES, template_script
from metaagentx.types import Call, Task

MATH = Task(id="m", prompt="What is 2+3?", kind="math", answer="5")
CODE = Task(id="c", prompt="Read n, print n*2.", kind="code")


@pytest.mark.parametrize(
    "text,answer",
    [
        ("so x = \\boxed{\\frac{1}{2}} done", "\\frac{1}{2}"),
        ("\\boxed{1} then \\boxed{\\sqrt{4}}", "\\sqrt{4}"),
        ("\\boxed{2} and an unclosed \\boxed{3", "2"),
        ("Final answer: 42.", "42"),
        ("The answer is **7**.", "7"),
        ("we get 1,234 apples", "1234"),
        ("3/4 of it", "3/4"),
        ("no digits here\nyes", "yes"),
        ("", ""),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


def test_extract_code_and_vote():
    assert (
        extract_code("Here:\n```python\nprint(1)\n```\nand\n```python\nprint(2)\n```") == "print(2)"
    )
    assert extract_code("```python\nprint(3)") == "print(3)"
    assert extract_code("print(4)") == "print(4)"
    assert majority_vote(["4", " 4.0 ", "5"]) == ("4", True)
    assert majority_vote(["1", "2"]) == ("1", False)
    assert majority_vote(["a", "b", "b", "a"]) == ("a", False)
    assert majority_vote([]) == ("", False)


@pytest.mark.parametrize("structure", TEMPLATES)
def test_templates_pass_the_check_and_classify_as_themselves(structure):
    for task in (MATH, CODE):
        script = template_script(structure, task)
        assert check_script(script) is None
        assert classify_structure(script) == structure
    assert "boxed" in template_script("single", MATH)
    assert "```python" in template_script("single", CODE)


def test_template_unknown_structure():
    with pytest.raises(ValueError, match="unknown structure 'star'"):
        template_script("star", MATH)


def _edges(graph: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s+(\w+) -\.?->(?:\|[^|]*\|)? (\w+)$", graph, re.MULTILINE))


def test_mermaid_from_script_reflection_and_ensemble():
    g = mermaid_from_script(template_script("reflection", MATH))
    assert g.startswith("graph TD\n")
    assert {
        ("question", "a_solver"),
        ("a_solver", "a_critic"),
        ("a_critic", "a_solver"),
        ("a_solver", "answer"),
    } <= _edges(g)
    g = mermaid_from_script(
        "team = [Agent(f's{i}', 'p') for i in range(3)]\n"
        "j = Agent('judge')\nsubmit(ensemble(team, QUESTION, judge=j))"
    )
    edges = _edges(g)
    for i in range(3):
        assert ("question", f"a_s{i}") in edges
    assert ("a_judge", "answer") in edges


def test_mermaid_from_script_asks_router_and_bad_input():
    g = mermaid_from_script(
        "a = Agent('x y')\nb = Agent('end')\nt = a.ask(QUESTION)\nu = b.ask(t)\nsubmit(u)"
    )
    assert _edges(g) == {("question", "a_x_y"), ("a_x_y", "a_end"), ("a_end", "answer")}
    g = mermaid_from_script(template_script("router", MATH))
    assert ("a_classifier", "a_solver") in _edges(g) and "|hard|" in g
    assert "script does not parse" in mermaid_from_script("def (")
    assert node_id('a"b') == "a_a_b"


def _call(agent: str) -> Call:
    return Call(
        role="executor",
        agent=agent,
        messages=[],
        prompt_ids=[1],
        response_ids=[2],
        logprobs=[-0.1],
        finish_reason="stop",
    )


def test_mermaid_from_calls_numbers_the_sequence():
    g = mermaid_from_calls([_call("solver"), _call("critic"), _call("solver"), _call("critic")])
    assert "question -->|1| a_solver" in g
    assert "a_solver -->|2, 4| a_critic" in g
    assert "a_critic -->|3| a_solver" in g
    assert "a_critic --> answer" in g
    assert mermaid_from_calls([]).strip() == 'graph TD\n  question(["QUESTION"])'


def test_mermaid_from_calls_draws_a_fan_out_side_by_side():
    def asked(agent: str, message: str) -> Call:
        call = _call(agent)
        call.messages = [{"role": "system", "content": "s"}, {"role": "user", "content": message}]
        return call

    g = mermaid_from_calls(
        [asked("s1", "Q"), asked("s2", "Q"), asked("s3", "Q"), asked("judge", "pick")]
    )
    for i in (1, 2, 3):
        assert f"question -->|{i}| a_s{i}" in g and f"a_s{i} -->|4| a_judge" in g
    assert "a_judge --> answer" in g and "a_s1 -->|2| a_s2" not in g
