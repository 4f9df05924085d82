"""classify_structure: one hand-built script per structure, by block call and by hand."""

from __future__ import annotations

import textwrap

import pytest

from metaagentx.mas.structure import STRUCTURES, classify_structure

BLOCK_SCRIPTS = {
    "single": "a = Agent('solver', 'Solve it.')\nsubmit(extract_answer(single(a, QUESTION)))",
    "reflection": """
        s = Agent('solver', 'Solve.')
        c = Agent('critic', 'Find errors.')
        submit(extract_answer(reflection(s, c, QUESTION, rounds=2)))
    """,
    "ensemble": """
        agents = [Agent(f'solver{i}', 'Solve.') for i in range(3)]
        submit(ensemble(agents, QUESTION, judge=Agent('judge', 'Pick one.')))
    """,
    "debate": """
        import metaagentx.mas.api as api
        agents = [api.Agent('a'), api.Agent('b')]
        submit(api.debate(agents, QUESTION, rounds=2))
    """,
    "solver_tester": """
        out = solver_tester(Agent('coder'), Agent('tester'), QUESTION, rounds=2)
        submit(out)
    """,
    "router": """
        routes = {
            'math': lambda q: reflection(Agent('s'), Agent('c'), q),
            'code': lambda q: solver_tester(Agent('coder'), Agent('tester'), q),
        }
        submit(router(Agent('classifier'), routes, QUESTION))
    """,
}

HAND_SCRIPTS = {
    "single": """
        # A debate between three experts with a judge (claims in comments do not count).
        debater = Agent('debate_judge', 'You are the judge of a debate ensemble.')
        submit(extract_answer(debater.ask(QUESTION)))
    """,
    "reflection": """
        solver = Agent('solver', 'Solve step by step.')
        critic = Agent('critic', 'Point out mistakes.')
        ans = solver.ask(QUESTION)
        for _ in range(2):
            feedback = critic.ask(f'Check this answer: {ans}')
            if 'CORRECT' in feedback:
                break
            ans = solver.ask(f'Revise using this feedback: {feedback}')
        submit(extract_answer(ans))
    """,
    "ensemble": """
        from collections import Counter
        agents = [Agent(f'solver{i}', 'Solve.') for i in range(5)]
        answers = [extract_answer(a.ask(QUESTION)) for a in agents]
        submit(Counter(answers).most_common(1)[0][0])
    """,
    "debate": """
        agents = [Agent('optimist'), Agent('skeptic'), Agent('analyst')]
        answers = [a.ask(QUESTION) for a in agents]
        for r in range(2):
            shared = '\\n'.join(answers)
            answers = [a.ask(f'Others said:\\n{shared}\\nUpdate your answer.') for a in agents]
        judge = Agent('judge')
        submit(extract_answer(judge.ask('Final answer? ' + '\\n'.join(answers))))
    """,
    "solver_tester": """
        coder = Agent('coder', 'Write Python.')
        code = coder.ask(QUESTION)
        for _ in range(2):
            result = run_python(code, stdin='1 2')
            code = coder.ask(f'The program printed {result}; fix it if wrong.')
        submit(code)
    """,
    "router": """
        classifier = Agent('classifier', 'Answer math or code.')
        kind = classifier.ask(f'Is this math or code? {QUESTION}')
        if 'code' in kind.lower():
            answer = Agent('coder').ask(QUESTION)
        else:
            answer = Agent('mathematician').ask(QUESTION)
        submit(answer)
    """,
    "other": """
        planner = Agent('planner')
        solver = Agent('solver')
        checker = Agent('checker')
        plan = planner.ask(QUESTION)
        draft = solver.ask(plan)
        submit(checker.ask(draft))
    """,
}


def _dedent(code: str) -> str:
    return textwrap.dedent(code).strip() + "\n"


@pytest.mark.parametrize("expected", sorted(BLOCK_SCRIPTS))
def test_block_calls_name_the_structure(expected: str) -> None:
    assert classify_structure(_dedent(BLOCK_SCRIPTS[expected])) == expected


@pytest.mark.parametrize("expected", sorted(HAND_SCRIPTS))
def test_hand_written_patterns(expected: str) -> None:
    assert classify_structure(_dedent(HAND_SCRIPTS[expected])) == expected


def test_every_structure_has_a_hand_written_case() -> None:
    assert set(HAND_SCRIPTS) == set(STRUCTURES)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("def broken(:\n", "other"),  # syntax error
        ("", "other"),  # nothing
        ("submit('42')", "other"),  # no agent is asked
        # one agent refining its own answer is self-reflection
        (
            "a = Agent('x')\nans = a.ask(QUESTION)\nfor _ in range(3):\n"
            "    ans = a.ask('Improve: ' + ans)\nsubmit(ans)",
            "reflection",
        ),
        # one agent sampled three times and voted is self-consistency (ensemble)
        (
            "a = Agent('x')\nvotes = [a.ask(QUESTION) for _ in range(3)]\n"
            "submit(max(set(votes), key=votes.count))",
            "ensemble",
        ),
        # two named debaters who both answer first, then read each other
        (
            "a = Agent('a')\nb = Agent('b')\nx = a.ask(QUESTION)\ny = b.ask(QUESTION)\n"
            "for _ in range(2):\n    x, y = a.ask(y), b.ask(x)\nsubmit(x)",
            "debate",
        ),
        # a solver and one critic pass that rewrites the answer
        ("s = Agent('s')\nc = Agent('c')\nsubmit(c.ask('Fix: ' + s.ask(QUESTION)))", "reflection"),
        # two different top-level blocks in sequence are a composite
        ("a = Agent('a')\nx = single(a, QUESTION)\nsubmit(reflection(a, Agent('c'), x))", "other"),
        # a user function named like a block is not the block
        ("def debate(q):\n    return Agent('a').ask(q)\nsubmit(debate(QUESTION))", "single"),
        # a router by dict lookup on the classifier's answer
        (
            "experts = {'math': Agent('m'), 'code': Agent('c')}\n"
            "k = Agent('cls').ask(QUESTION).strip()\nsubmit(experts[k].ask(QUESTION))",
            "router",
        ),
        # a reflection loop whose early exit is an `if` is not a router
        (
            "s = Agent('s')\nc = Agent('c')\nans = s.ask(QUESTION)\nfb = c.ask(ans)\n"
            "if 'OK' not in fb:\n    ans = s.ask(fb)\nsubmit(ans)",
            "reflection",
        ),
        # ask_all: three solvers at once, then a majority vote
        (
            "xs = ask_all([Agent('a'), Agent('b'), Agent('c')], QUESTION)\n"
            "submit(majority_vote(xs)[0])",
            "ensemble",
        ),
        # ask_all in rounds where everyone reads everyone: a debate
        (
            "team = [Agent(f'd{i}') for i in range(3)]\nxs = ask_all(team, QUESTION)\n"
            "for _ in range(2):\n    xs = ask_all(team, 'Others: ' + ' | '.join(xs))\n"
            "submit(xs[0])",
            "debate",
        ),
    ],
)
def test_edge_cases(script: str, expected: str) -> None:
    assert classify_structure(script) == expected


def test_built_in_templates_classify_as_themselves() -> None:
    templates = pytest.importorskip("metaagentx.mas.templates")
    from metaagentx.types import Task

    for kind in ("math", "code"):
        task = Task(id="t", prompt="p", kind=kind)
        for name in templates.TEMPLATES:
            assert classify_structure(templates.template_script(name, task)) == name


def test_never_raises_on_mangled_scripts() -> None:
    import random

    rng = random.Random(0)
    sources = [_dedent(c) for c in (*BLOCK_SCRIPTS.values(), *HAND_SCRIPTS.values())]
    lines = [ln for src in sources for ln in src.splitlines()]
    for _ in range(300):
        picked = rng.sample(lines, rng.randint(1, 8))
        script = "\n".join(ln.lstrip() if rng.random() < 0.5 else ln for ln in picked)
        assert classify_structure(script) in STRUCTURES
    deep = "x = " + "[" * 150 + "Agent('a').ask(QUESTION)" + "]" * 150 + "\nsubmit(x)"
    assert classify_structure(deep) in STRUCTURES
