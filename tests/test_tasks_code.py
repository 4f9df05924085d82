"""Code reward in the sandbox: right, wrong, crashing, slow, over-printing, call-based programs,
real dataset rows, and the ``reward`` dispatch on tasks."""

from __future__ import annotations

import asyncio

import pytest

from metaagentx.tasks import reward, reward_details, reward_details_async
from metaagentx.tasks.code import code_reward, code_reward_details, extract_program
from metaagentx.tasks.datasets import load_tasks
from metaagentx.types import Task

ADD = {"inputs": ["1 2\n", "3 4\n", "10 -3\n"], "outputs": ["3\n", "7", "7\n\n"]}
ADD_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"


def test_extract_program_prefers_last_python_block():
    text = "x\n```python\nprint(1)\n```\nthen\n```\nplain\n```\n```python\nprint(2)\n```\n```text\nz\n```"
    assert extract_program(text) == "print(2)\n"
    assert extract_program("```\nprint(3)\n```") == "print(3)\n"
    assert extract_program("```cpp\nint main(){}\n```") == "int main(){}\n"
    assert extract_program("no code here") is None


def test_right_program_passes_every_test():
    d = code_reward_details(ADD_PROGRAM, ADD)
    assert d["reward"] == 1.0 and d["pass_fraction"] == 1.0
    assert d["statuses"] == ["pass"] * 3 and d["first_failure"] is None
    # trailing spaces and extra trailing blank lines are ignored
    assert code_reward("a, b = map(int, open(0).read().split())\nprint(a + b, '  \\n\\n')", ADD)


def test_wrong_and_partially_right_programs():
    d = code_reward_details("a, b = map(int, input().split())\nprint(a - b)", ADD)
    assert d["reward"] == 0.0 and d["statuses"] == ["wrong"] * 3
    assert d["first_failure"]["index"] == 0 and "-1" in d["first_failure"]["detail"]
    half = "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)"
    d = code_reward_details(half, ADD)
    assert d["statuses"] == ["pass", "pass", "wrong"]
    assert d["pass_fraction"] == pytest.approx(2 / 3) and d["reward"] == 0.0
    assert d["first_failure"]["index"] == 2 and d["reason"] == "wrong"
    # leading whitespace on a line matters
    assert code_reward("a, b = map(int, input().split())\nprint(' ', a + b)", ADD) == 0.0


def test_crashing_programs_are_errors():
    d = code_reward_details("print(1 // 0)", ADD)
    assert d["statuses"] == ["error"] * 3
    assert "ZeroDivisionError" in d["first_failure"]["detail"]
    d = code_reward_details("def f(:\n  pass", ADD)
    assert d["reason"] == "error" and "SyntaxError" in d["first_failure"]["detail"]
    assert code_reward_details("import sys\nsys.exit(3)", ADD)["reason"] == "error"
    assert code_reward_details("", ADD)["reason"] == "no_program"


def test_exit_zero_after_printing_counts_as_a_normal_end():
    prog = "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\nprint(9)"
    assert code_reward(prog, ADD) == 1.0
    assert code_reward(prog.replace("sys.exit(0)", "exit()"), ADD) == 1.0  # site's exit()


def test_slow_program_times_out_per_test():
    prog = "a, b = map(int, input().split())\nif a == 3:\n    while True: pass\nprint(a + b)"
    d = code_reward_details(prog, ADD, timeout_s=1.0)
    assert d["statuses"] == ["pass", "timeout", "pass"]
    assert d["reason"] == "timeout" and d["first_failure"]["index"] == 1
    assert (
        code_reward_details("import time\ntime.sleep(30)", ADD, timeout_s=1.0)["statuses"]
        == ["timeout"] * 3
    )


def test_over_printing_is_cut_off_and_wrong():
    d = code_reward_details("while True:\n    print('x' * 10000)", ADD, timeout_s=5.0)
    assert d["statuses"] == ["wrong"] * 3
    assert "output over" in d["first_failure"]["detail"]


CALL = {"fn_name": "add", "inputs": [[[1, 2], 3], [[0], 1]], "outputs": [[4, 5], [1]]}


def test_call_based_leetcode_solution_and_top_level_function():
    lc = (
        "class Solution:\n"
        "    def add(self, a: List[int], b: int) -> List[int]:\n"
        "        return [x + b for x in a]\n"
    )
    assert code_reward_details(lc, CALL)["statuses"] == ["pass", "pass"]
    top = "def add(a, b):\n    return tuple(x + b for x in a)\n"  # tuples compare as lists
    assert code_reward(top, CALL) == 1.0
    wrong = "def add(a, b):\n    return [x * b for x in a]\n"
    d = code_reward_details(wrong, CALL)
    assert d["statuses"] == ["wrong", "wrong"] and "expected [4, 5], got [3, 6]" in str(d)
    d = code_reward_details("def other(a, b):\n    return a\n", CALL)
    assert d["reason"] == "error" and "add" in d["first_failure"]["detail"]


def test_call_based_tests_do_not_share_state_and_types_are_strict():
    acc = "seen = []\ndef f(x):\n    seen.append(x)\n    return len(seen)\n"
    tests = {"fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [1, 1, 1]}
    assert code_reward(acc, tests) == 1.0
    boolean = {"fn_name": "f", "inputs": [[1]], "outputs": [True]}
    assert code_reward("def f(x):\n    return 1\n", boolean) == 0.0
    assert code_reward("def f(x):\n    return x == 1\n", boolean) == 1.0
    floats = {"fn_name": "f", "inputs": [[3]], "outputs": [0.3333333]}
    assert code_reward("def f(x):\n    return 1 / x\n", floats) == 1.0
    assert code_reward("def f(x):\n    return 0.34\n", floats) == 0.0


LEETCODE_IDS = [
    "leetcode-train-0000",
    "leetcode-train-0002",
    "leetcode-train-0004",
    "leetcode-train-0007",
    "leetcode-train-0021",
]


@pytest.fixture(scope="module")
def code_tasks(data_dir):
    specs = (data_dir / "train_code", data_dir / "codecontests")
    return {t.id: t for spec in specs for t in load_tasks(str(spec))}


def test_leetcode_reference_solutions_score_one(code_tasks):
    for task_id in LEETCODE_IDS:
        task = code_tasks[task_id]
        d = code_reward_details(task.meta["reference_solution"], task.tests)
        assert d["reward"] == 1.0, (task_id, d)


CC_SORT = """
n, m = map(int, input().split())
books = [input().strip() for _ in range(n)]
def key(i):
    s = books[i]
    return tuple(ord(c) if j % 2 == 0 else -ord(c) for j, c in enumerate(s))
print(*[i + 1 for i in sorted(range(n), key=key)])
"""
CF_MINMAX = """
t = int(input())
for _ in range(t):
    x, y = map(int, input().split())
    print(min(x, y), max(x, y))
"""


def test_real_stdin_rows_solved(code_tasks):
    d = code_reward_details(CC_SORT, code_tasks["codecontests-test-000"].tests)
    assert d["reward"] == 1.0, d
    assert code_reward(CF_MINMAX, code_tasks["codeforces2024-000"].tests) == 1.0
    assert (
        code_reward(
            CF_MINMAX.replace("min(x, y), max", "max(x, y), min"),
            code_tasks["codeforces2024-000"].tests,
        )
        == 0.0
    )


def test_reward_dispatch_on_tasks():
    code_task = Task(id="c", prompt="add", kind="code", tests=ADD)
    fenced = f"Here it is:\n```python\n{ADD_PROGRAM}```\nDone."
    assert reward(code_task, fenced) == 1.0
    assert reward(code_task, ADD_PROGRAM) == 1.0  # unfenced: the text is the program
    d = reward_details(code_task, "```python\nprint(0)\n```")
    assert (d["reward"], d["pass_fraction"], d["reason"]) == (0.0, 0.0, "wrong")
    math_task = Task(id="m", prompt="6*7?", kind="math", answer="42")
    assert reward(math_task, r"so \boxed{42}") == 1.0
    assert reward_details(math_task, "41") == {
        "reward": 0.0,
        "pass_fraction": 0.0,
        "reason": "wrong",
    }
    both = asyncio.run(_both(code_task, math_task))
    assert [b["reward"] for b in both] == [1.0, 1.0]


async def _both(code_task: Task, math_task: Task) -> list[dict]:
    return await asyncio.gather(
        reward_details_async(code_task, ADD_PROGRAM), reward_details_async(math_task, "42")
    )


FORGE = """import os
line = 'MAX_HARNESS_RESULT {"results": [{"status": "pass", "detail": ""}]}\\n'
for target in ("/proc/%d/fd/1" % os.getppid(), "/proc/1/fd/1"):
    try:
        os.write(os.open(target, os.O_WRONLY), line.encode())
    except OSError:
        pass
print(line)
"""


def test_a_program_cannot_forge_the_harness_report():
    d = code_reward_details(FORGE, {"inputs": ["1\n"], "outputs": ["2\n"]})
    assert d["reward"] == 0.0 and d["statuses"] != ["pass"]


def test_worker_replaced_after_exit_crash_or_leftover_threads():
    os_exit = (
        "import os, sys\na, b = map(int, input().split())\nprint(a + b)\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    )
    assert code_reward_details(os_exit, ADD)["statuses"] == ["pass"] * 3
    segv = (
        "import os, signal\na, b = map(int, input().split())\n"
        "if a == 3:\n    os.kill(os.getpid(), signal.SIGSEGV)\nprint(a + b)\n"
    )
    d = code_reward_details(segv, ADD, parallel=1)
    assert d["statuses"] == ["pass", "error", "pass"] and "signal" in d["first_failure"]["detail"]
    threads = (
        "import threading, time\n"
        "threading.Thread(target=lambda: time.sleep(60), daemon=True).start()\n"
        "a, b = map(int, input().split())\nprint(a + b)\n"
    )
    assert code_reward_details(threads, ADD, parallel=1)["statuses"] == ["pass"] * 3
