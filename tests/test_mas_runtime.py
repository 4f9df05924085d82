"""Designed scripts run in the sandbox against the scripted backend: every block, every outcome,
exact call records, and batching across 32 concurrent executions."""

from __future__ import annotations

import asyncio
import re

import pytest

from metaagentx.backends.base import SamplingParams
from metaagentx.backends.scripted import ScriptedGenerator
from metaagentx.config import MASConfig
from metaagentx.mas.runtime import design, designer_messages, execute
from metaagentx.mas.templates import template_script
from metaagentx.types import Outcome, Task

MATH = Task(id="m1", prompt="What is 6 * 7?", kind="math", answer="42")
CODE = Task(id="c1", prompt="Read an integer n and print 2*n.", kind="code")
FAST = MASConfig(timeout_s=20.0, tool_timeout_s=5.0)


def by_role(rules: dict[str, str], default: str = "\\boxed{0}"):
    """Reply by the first rule whose key occurs in the last message, else in the system prompt."""

    def reply(messages):
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        last = messages[-1]["content"]
        for where in (last, system):  # the message decides first, then the role prompt
            for key, text in rules.items():
                if key in where:
                    return text
        return default

    return reply


def run(script: str, gen: ScriptedGenerator, task: Task = MATH, mas: MASConfig = FAST):
    return asyncio.run(execute(script, task, gen, mas=mas))


def test_single_records_exact_calls():
    gen = ScriptedGenerator(["Six sevens are \\boxed{42}."])
    ex = run(template_script("single", MATH), gen)
    assert ex.outcome == Outcome.SUBMITTED and ex.answer == "42", ex.reason
    (call,) = ex.calls
    assert call.role == "executor" and call.agent == "solver"
    assert call.messages[-1] == {"role": "user", "content": "What is 6 * 7?"}
    assert call.prompt_ids == gen.render(call.messages)
    assert gen.decode(call.response_ids) == call.text == "Six sevens are \\boxed{42}."
    assert len(call.logprobs) == len(call.response_ids) and call.finish_reason == "stop"


def test_reflection_stops_on_correct_and_revises_otherwise():
    gen = ScriptedGenerator(
        by_role({"reviewer": "CORRECT", "reviewer says": "\\boxed{42}"}, "\\boxed{41}")
    )
    ex = run(template_script("reflection", MATH), gen)
    assert [c.agent for c in ex.calls] == ["solver", "critic"] and ex.answer == "41"
    gen = ScriptedGenerator(
        by_role(
            {
                "reviewer says": "fixed: \\boxed{42}",
                "strict math reviewer": "Wrong: 6*7 is not 41.",
            },
            "\\boxed{41}",
        )
    )
    ex = run(template_script("reflection", MATH), gen)
    assert [c.agent for c in ex.calls] == ["solver", "critic", "solver"] and ex.answer == "42"
    assert "6*7 is not 41" in ex.calls[2].messages[-1]["content"]
    assert len(ex.calls[2].messages) == 4  # system, question, first answer, critique


def test_ensemble_majority_and_judge():
    script = (
        "team = [Agent(f's{i}', f'solver {i}') for i in range(3)]\n"
        "judge = Agent('judge', 'the judge')\n"
        "submit(ensemble(team, QUESTION, judge=judge))"
    )
    gen = ScriptedGenerator(
        by_role({"solver 0": "\\boxed{42}", "solver 1": "\\boxed{42.0}", "solver 2": "\\boxed{7}"})
    )
    ex = run(script, gen)
    assert ex.answer == "42" and len(ex.calls) == 3
    assert gen.batch_sizes == [3]  # the three solvers were asked in one batch
    gen = ScriptedGenerator(
        by_role(
            {
                "the judge": "Candidate 2 is right: \\boxed{9}",
                "solver 0": "\\boxed{1}",
                "solver 1": "\\boxed{9}",
                "solver 2": "\\boxed{7}",
            }
        )
    )
    ex = run(script, gen)
    assert ex.answer == "9" and [c.agent for c in ex.calls][-1] == "judge"
    assert "Candidate 3:\n\\boxed{7}" in ex.calls[-1].messages[-1]["content"]


def test_ensemble_of_one_agent_repeated_samples_independently():
    gen = ScriptedGenerator(["\\boxed{3}", "\\boxed{4}", "\\boxed{4}"])
    ex = run("s = Agent('s', 'solve')\nsubmit(ensemble([s] * 3, QUESTION))", gen)
    assert ex.answer == "4" and gen.batch_sizes == [3]
    assert all(len(c.messages) == 2 for c in ex.calls)  # no shared history between copies


def test_debate_rounds_share_answers_then_judge():
    gen = ScriptedGenerator(
        by_role(
            {
                "the judge": "\\boxed{42}",
                "Other agents": "I now say 42",
                "A": "\\boxed{40}",
                "B": "\\boxed{44}",
            }
        )
    )
    script = (
        "a = Agent('a', 'A')\nb = Agent('b', 'B')\nj = Agent('j', 'the judge')\n"
        "submit(debate([a, b], QUESTION, rounds=2, judge=j))"
    )
    ex = run(script, gen)
    assert [c.agent for c in ex.calls] == ["a", "b", "a", "b", "j"] and ex.answer == "42"
    assert "b said:\n\\boxed{44}" in ex.calls[2].messages[-1]["content"]
    assert "a said:\n\\boxed{40}" in ex.calls[3].messages[-1]["content"]


def test_solver_tester_math_runs_the_program():
    gen = ScriptedGenerator(
        by_role(
            {
                "Is the program correct": "PASS",
                "short Python program": "```python\nprint(6 * 7)\n```",
            }
        )
    )
    ex = run(template_script("solver_tester", MATH), gen)
    assert ex.outcome == Outcome.SUBMITTED and ex.answer == "42", ex.reason
    assert ex.tool_runs == 1 and "Program output:\n42" in ex.calls[1].messages[-1]["content"]
    # a program that crashes on its last run: fall back to the solver's own final answer
    gen = ScriptedGenerator(
        by_role(
            {
                "Is the program correct": "FAIL",
                "Fix it": "```python\nprint(1 / 0)\n```\nIt is \\boxed{42}",
                "short Python program": "```python\nprint(6 * 7\n```",
            }
        )
    )
    ex = run(template_script("solver_tester", MATH), gen)
    assert ex.answer == "42" and ex.tool_runs == 2


def test_solver_tester_code_feedback_loop():
    good = "```python\nprint(2 * int(input()))\n```"
    gen = ScriptedGenerator(
        by_role(
            {
                "Fix it": good,
                "test input": "```\n21\n```",
                "Program output:\n42": "PASS",
                "Program output:": "FAIL: it must double n",
                "expert programmer": "```python\nprint(int(input()))\n```",
            }
        )
    )
    script = template_script("solver_tester", CODE).replace("rounds=1", "rounds=2")
    ex = run(script, gen, CODE)
    assert ex.outcome == Outcome.SUBMITTED, ex.reason
    assert ex.answer == "print(2 * int(input()))"
    assert [c.agent for c in ex.calls] == ["coder", "tester", "tester", "coder", "tester", "tester"]
    assert ex.tool_runs == 2


def test_router_follows_the_classifier():
    gen = ScriptedGenerator(
        by_role({"classify": "This one is hard.", "reviewer": "CORRECT"}, "\\boxed{42}")
    )
    ex = run(template_script("router", MATH), gen)
    assert [c.agent for c in ex.calls] == ["classifier", "solver", "critic"]
    assert ex.answer == "42"


def test_run_python_stdin_print_and_imports():
    script = (
        "import math\nout = run_python('print(int(input()) + 1)', stdin='41')\n"
        "print('tool said', out.strip())\nsubmit(out.strip() + str(math.floor(0.5)))"
    )
    ex = run(script, ScriptedGenerator(["unused"]))
    assert ex.answer == "420" and ex.tool_runs == 1 and "tool said 42" in ex.stdout
    ex = run("submit(run_python('raise SystemExit(3)'))", ScriptedGenerator(["x"]))
    assert "[exit code 3]" in ex.answer


@pytest.mark.parametrize(
    "script,outcome,reason",
    [
        ("a = Agent('a')\na.ask(QUESTION)\nif False:\n    submit(1)", Outcome.NO_ANSWER, "without"),
        ("import os\nsubmit(1)", Outcome.REJECTED, "forbidden_import"),
        ("x = 1 / 0\nsubmit(x)", Outcome.RUNTIME_ERROR, "ZeroDivisionError: division by zero"),
        ("while True:\n    pass\nsubmit(1)", Outcome.TIMEOUT, "ran past mas.timeout_s=2.0"),
        (
            "while True:\n    print('x' * 100000)\nsubmit(1)",
            Outcome.RUNTIME_ERROR,
            "killed: output_limit",
        ),
        ("x = 'a' * 10 ** 10\nsubmit(1)", Outcome.RUNTIME_ERROR, "MemoryError"),
        (
            "a = Agent('a')\nfor i in range(3):\n    a.ask('hi')\nsubmit(1)",
            Outcome.BUDGET_EXCEEDED,
            "call budget",
        ),
        (
            "a = Agent('a')\ntry:\n    a.ask('x'); a.ask('y'); a.ask('z')\nexcept:\n    pass\n"
            "submit(1)",
            Outcome.BUDGET_EXCEEDED,
            "call budget",
        ),
        (
            "a = Agent('a')\nfor i in range(2):\n    a.ask(QUESTION)\nsubmit(1)",
            Outcome.BUDGET_EXCEEDED,
            "token budget",
        ),
        (
            "a = Agent('a', 'x' * 500)\nsubmit(a.ask('hi'))",
            Outcome.BUDGET_EXCEEDED,
            "prompt_too_long",
        ),
        (
            "a = Agent('a', temperature=-1)\nsubmit(a.ask('hi'))",
            Outcome.RUNTIME_ERROR,
            "bad agent settings",
        ),
        ("import json\nsubmit(__import__('os'))", Outcome.REJECTED, "dunder_access"),
    ],
)
def test_outcomes(script, outcome, reason):
    gen = ScriptedGenerator(["\\boxed{1}"], max_prompt_tokens=300)
    mas = MASConfig(
        max_calls=2,
        max_tokens=6 if "QUESTION)\n" in script else 1000,
        timeout_s=2.0 if script.startswith("while True:\n    pass") else 20.0,
    )
    ex = run(script, gen, mas=mas)
    assert ex.outcome == outcome, (ex.outcome, ex.reason)
    if reason:
        assert reason in ex.reason
    assert ex.answer is None
    if outcome == Outcome.BUDGET_EXCEEDED and "call" in reason:
        assert len(ex.calls) == 2  # the two admitted calls are still recorded


def test_first_submit_counts_even_when_caught():
    ex = run("try:\n    submit('a')\nexcept:\n    submit('b')", ScriptedGenerator(["x"]))
    assert ex.outcome == Outcome.SUBMITTED and ex.answer == "a"


def test_token_budget_caps_each_call():
    gen = ScriptedGenerator(["a long reply " * 10])
    ex = run("a = Agent('a')\nsubmit(a.ask('hi'))", gen, mas=MASConfig(max_tokens=5))
    assert ex.outcome == Outcome.SUBMITTED and len(ex.calls[0].response_ids) == 5
    assert ex.calls[0].finish_reason == "length"


def test_32_concurrent_executions_are_batched_and_kept_apart():
    def reply(messages):
        marker = re.search(r"task-(\d+)", messages[-1]["content"]).group(1)
        return f"For task-{marker} the answer is \\boxed{{{marker}}}"

    gen = ScriptedGenerator(reply)
    tasks = [Task(id=str(i), prompt=f"Echo task-{i}", kind="math") for i in range(32)]
    script = (
        "a = Agent('a')\nb = Agent('b')\nfirst = a.ask(QUESTION)\n"
        "submit(extract_answer(b.ask(first)))"
    )

    async def main():
        return await asyncio.gather(*(execute(script, t, gen, mas=FAST) for t in tasks))

    executions = asyncio.run(main())
    assert gen.calls == 64 and gen.batches < gen.calls
    for i, ex in enumerate(executions):
        assert ex.outcome == Outcome.SUBMITTED and ex.answer == str(i)
        assert [c.agent for c in ex.calls] == ["a", "b"]
        for call in ex.calls:
            assert f"task-{i}" in call.text and f"task-{i}" in call.messages[-1]["content"]
            assert call.prompt_ids == gen.render(call.messages)


def test_design_extracts_checks_and_classifies():
    reply = (
        "Here is my team.\n```python\nteam = [Agent(f's{i}', 'solve') for i in range(3)]\n"
        "submit(ensemble(team, QUESTION))\n```"
    )
    gen = ScriptedGenerator([reply])
    d = asyncio.run(design(MATH, gen, sampling=SamplingParams(max_new_tokens=400)))
    assert d.rejected is None and d.structure == "ensemble" and d.script.startswith("team =")
    assert d.call.role == "designer" and d.call.agent == "designer"
    assert d.call.messages == designer_messages(MATH)
    assert "submit(" in d.call.messages[0]["content"] and "6 * 7" in d.call.messages[1]["content"]
    d = asyncio.run(design(MATH, ScriptedGenerator(["I would use one agent."])))
    assert d.rejected == "no_script" and d.script == "" and d.call is not None
    d = asyncio.run(design(MATH, ScriptedGenerator(["x"], max_prompt_tokens=50)))
    assert d.rejected == "prompt_too_long" and d.call is None


def test_code_task_submits_the_program_and_api_imports_work():
    gen = ScriptedGenerator(["Here:\n```python\nn = int(input())\nprint(2 * n)\n```\nDone."])
    script = (
        "from metaagentx.mas.api import Agent, single, submit\n"
        "from metaagentx.mas import api\n"
        "coder = Agent('coder', 'write code')\napi.submit(single(coder, QUESTION))"
    )
    ex = run(script, gen, CODE)
    assert ex.outcome == Outcome.SUBMITTED, ex.reason
    assert ex.answer == "n = int(input())\nprint(2 * n)"


def test_script_globals_block_imports_and_builtins_in_process():
    from metaagentx.mas import api
    from metaagentx.mas.script import ALLOWED_MODULES, FORBIDDEN_NAMES

    g = api._script_globals("Q?", "math", list(ALLOWED_MODULES), sorted(FORBIDDEN_NAMES))
    assert g["QUESTION"] == "Q?" and g["submit"] is api.submit
    exec("import math\nx = math.floor(2.5)", g)
    assert g["x"] == 2
    with pytest.raises(ImportError, match="'os' is not allowed"):
        exec("import os", g)
    with pytest.raises(NameError):
        exec("open('x')", g)
