"""Built-in MAS designs: one script per structure, with role prompts for math or code tasks.

    script = template_script("reflection", task)   # a script using metaagentx.mas.api
    execution = await execute(script, task, generator)

Used by ``metaagentx solve --structure NAME``, fixed-structure baselines and the cold start.
"""

from __future__ import annotations

from metaagentx.types import Task

TEMPLATES: tuple[str, ...] = (
    "single",
    "reflection",
    "ensemble",
    "debate",
    "solver_tester",
    "router",
)

_ROLES: dict[str, dict[str, str]] = {
    "math": {
        "solver": "You are a careful math solver. Think step by step, then give the final "
        "answer as \\boxed{answer}.",
        "critic": "You are a strict math reviewer. Check each step of the solution. If it is "
        "right, reply CORRECT; otherwise explain the mistake.",
        "judge": "You are a judge. Compare the candidate solutions, pick the correct one and "
        "give the final answer as \\boxed{answer}.",
        "coder": "You solve math problems by writing a short Python program that prints only "
        "the final answer.",
        "tester": "You check whether a program's output answers the problem. Reply PASS or "
        "FAIL with a reason.",
        "classifier": "You classify math problems by difficulty.",
    },
    "code": {
        "solver": "You are an expert programmer. Write a complete Python program that reads "
        "from standard input and prints the answer. Put it in a ```python block.",
        "critic": "You are a code reviewer. Look for bugs and wrong edge cases. If the code is "
        "right, reply CORRECT; otherwise explain the bug.",
        "judge": "You are a judge. Pick the correct program among the candidates and repeat it "
        "in full in a ```python block.",
        "coder": "You are an expert programmer. Write a complete Python program that reads "
        "from standard input and prints the answer. Put it in a ```python block.",
        "tester": "You are a software tester. Write small test inputs and check program "
        "outputs. Reply PASS or FAIL with a reason when asked to judge.",
        "classifier": "You classify programming problems by difficulty.",
    },
}


def _agent(var: str, name: str, role: str, roles: dict[str, str], extra: str = "") -> str:
    return f"{var} = Agent({name!r}, {roles[role]!r}{extra})"


def _body(structure: str, roles: dict[str, str]) -> list[str]:
    solver = _agent("solver", "solver", "solver", roles)
    if structure == "single":
        return [solver, "answer = single(solver, QUESTION)"]
    if structure == "reflection":
        return [
            solver,
            _agent("critic", "critic", "critic", roles),
            "answer = reflection(solver, critic, QUESTION, rounds=1)",
        ]
    if structure == "ensemble":
        return [
            "solvers = [",
            *[
                f"    Agent({f'solver{i}'!r}, {roles['solver']!r}, temperature=1.0),"
                for i in (1, 2, 3)
            ],
            "]",
            _agent("judge", "judge", "judge", roles),
            "answer = ensemble(solvers, QUESTION, judge=judge)",
        ]
    if structure == "debate":
        return [
            _agent("alice", "alice", "solver", roles),
            _agent("bob", "bob", "solver", roles),
            _agent("judge", "judge", "judge", roles),
            "answer = debate([alice, bob], QUESTION, rounds=2, judge=judge)",
        ]
    if structure == "solver_tester":
        return [
            _agent("coder", "coder", "coder", roles),
            _agent("tester", "tester", "tester", roles),
            "answer = solver_tester(coder, tester, QUESTION, rounds=1)",
        ]
    if structure == "router":
        return [
            _agent("classifier", "classifier", "classifier", roles),
            solver,
            _agent("critic", "critic", "critic", roles),
            "routes = {",
            "    'easy': solver,",
            "    'hard': lambda q: reflection(solver, critic, q, rounds=1),",
            "}",
            "answer = router(classifier, routes, QUESTION)",
        ]
    raise ValueError(f"unknown structure {structure!r}; choose one of {', '.join(TEMPLATES)}")


def template_script(structure: str, task: Task) -> str:
    """The built-in script for ``structure`` (one of TEMPLATES) with role prompts for
    ``task.kind``; it reads the task from ``QUESTION`` and ends with ``submit(answer)``."""
    if task.kind not in _ROLES:
        raise ValueError(f"task.kind must be 'math' or 'code', got {task.kind!r}")
    lines = [f"# {structure} ({task.kind})", *_body(structure, _ROLES[task.kind]), "submit(answer)"]
    return "\n".join(lines) + "\n"
