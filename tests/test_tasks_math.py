"""Math reward: answer extraction, strict equivalence, time limit, threads and asyncio."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from metaagentx.tasks.math import (
    extract_final_answer,
    last_boxed,
    math_reward,
    math_reward_async,
    math_reward_details,
)


def test_last_boxed_balances_braces():
    assert last_boxed(r"a \boxed{1} then \boxed{\frac{1}{2}} end") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{\{1,2\}}") == r"\{1,2\}"
    assert last_boxed(r"\fbox{7}") == "7"
    assert last_boxed(r"\boxed{unclosed") is None
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    "response, expected",
    [
        (r"so $x=2$ and \boxed{204}.", "204"),
        ("Work...\nFinal answer: 42", "42"),
        ("The answer is $\\frac{3}{4}$.", r"\frac{3}{4}"),
        ("**Final Answer:** 17.", "17"),
        ("Answer: (1, 2)", "(1, 2)"),
        ("204", "204"),
        ("$\\sqrt{2}$", r"\sqrt{2}"),
        ("I computed many things like 3 and 4\nand then more text", None),
        ("", None),
    ],
)
def test_extract_final_answer(response, expected):
    assert extract_final_answer(response) == expected


EQUIVALENT = [
    (r"\boxed{204}", "204"),
    (r"\boxed{204.0}", "204"),
    (r"\boxed{0.5}", r"\frac{1}{2}"),  # a float equal to the fraction
    (r"\boxed{2/4}", r"\frac{1}{2}"),
    (r"\boxed{\frac{2}{4}}", "1/2"),
    (r"\boxed{\sqrt{8}}", r"2\sqrt{2}"),
    (r"\boxed{(1,2)}", "(1,2)"),
    (r"\boxed{[1,2)}", "[1,2)"),
    (r"\boxed{(x+1)^2}", "x^2+2x+1"),
    (r"\boxed{\frac{1}{2(n+1)}}", r"\frac{1}{2n+2}"),
    (r"\boxed{10^{10}+1}", "10000000001"),
    ("The answer is 25.", "25"),
    (r"\boxed{1,000}", "1000"),  # thousands separator
    (r"\boxed{5 \text{ cm}}", "5"),  # units
    (r"\boxed{\dfrac{3}{4}}", r"\frac34"),
]
NOT_EQUIVALENT = [
    (r"\boxed{203}", "204"),
    ("Final answer: 203.9", "204"),
    (r"\boxed{2040}", "204"),
    (r"\boxed{10000000000}", "10000000001"),
    (r"\boxed{0.333}", r"\frac{1}{3}"),  # no tolerance beyond 6 decimals
    (r"\boxed{\frac{1}{3}}", r"\frac{1}{2}"),
    (r"\boxed{\sqrt{8}}", r"3\sqrt{2}"),
    (r"\boxed{(2,1)}", "(1,2)"),  # tuples are ordered
    (r"\boxed{(1,2)}", "[1,2)"),  # open vs half-open interval
    (r"\boxed{[1,2]}", "[1,2)"),
    (r"\boxed{(x+1)^2}", "x^2+2x+2"),
    (r"\boxed{y+1}", "x+1"),  # variables matter
    (r"\boxed{3}", "-3"),
]


@pytest.mark.parametrize("response, answer", EQUIVALENT)
def test_equivalent_answers_score_one(response, answer):
    assert math_reward_details(response, answer) == (1.0, "correct")


@pytest.mark.parametrize("response, answer", NOT_EQUIVALENT)
def test_different_answers_score_zero(response, answer):
    assert math_reward_details(response, answer) == (0.0, "wrong")


def test_no_answer_is_recorded():
    assert math_reward_details("I am not sure.\nMaybe later.", "3") == (0.0, "no_answer")


def test_timeout_scores_zero_and_pool_recovers():
    # 9^(9^9) has ~370 million digits: verification cannot finish within the limit
    assert math_reward_details(r"\boxed{9^{9^{9}}}", "5", timeout_s=1.0) == (0.0, "timeout")
    assert math_reward(r"\boxed{5}", "5") == 1.0  # the stuck worker was replaced


def test_callable_from_threads_and_asyncio():
    answers = [(rf"\boxed{{{i}}}", str(i if i % 3 else i + 1)) for i in range(12)]
    with ThreadPoolExecutor(max_workers=6) as ex:
        got = list(ex.map(lambda ra: math_reward(*ra), answers))
    assert got == [0.0 if i % 3 == 0 else 1.0 for i in range(12)]

    async def many():
        return await asyncio.gather(*(math_reward_async(r, a) for r, a in answers[:4]))

    assert [r for r, _ in asyncio.run(many())] == [0.0, 1.0, 1.0, 0.0]


def test_a_worker_dying_mid_job_is_recorded_and_replaced():
    import threading
    import time

    from metaagentx.tasks import math as math_mod

    math_reward(r"\boxed{1}", "1")  # a warm worker exists

    def kill_workers():
        time.sleep(1.0)
        for worker in list(math_mod._pool()._all):
            worker.proc.kill()

    killer = threading.Thread(target=kill_workers)
    killer.start()
    reward, reason = math_reward_details(r"\boxed{9^{9^{9}}}", "5", timeout_s=30.0)
    killer.join()
    assert reward == 0.0 and reason.startswith("verifier_crashed")
    assert math_reward(r"\boxed{5}", "5") == 1.0


def test_a_worker_that_died_idle_is_not_blamed_on_the_next_input():
    from metaagentx.tasks import math as math_mod

    math_reward(r"\boxed{1}", "1")  # a warm, idle worker exists
    for worker in list(math_mod._pool()._all):
        worker.proc.kill()  # dies while idle; not yet reaped when the next job comes
    assert math_reward_details(r"\boxed{5}", "5") == (1.0, "correct")
