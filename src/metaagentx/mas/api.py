"""The block library designer scripts use to build a multi-agent system (stdlib only).

This module runs INSIDE the sandbox. Every LLM call and every tool run is a request to the
parent over ``metaagentx.mas.channel.request``; the parent generates, records the call and
replies. A script gets every public name below predefined (no import needed; ``from
metaagentx.mas.api import Agent`` also works):

    solver = Agent("solver", "Solve the problem. End with \\boxed{answer}.")
    submit(single(solver, QUESTION))

Blocks return the final answer (a math answer string, or a program for code tasks); only
``submit`` hands it to the parent, and the first ``submit`` ends the script. When the parent
stops a run (call/token budget spent, prompt too long) the pending call raises ``StopRun``, a
``BaseException`` that ``except Exception`` cannot swallow; the parent's record is authoritative.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

QUESTION = ""  # the task prompt; set by the runtime before the script runs
TASK_KIND = "math"  # "math" (submit a final answer) or "code" (submit a Python program)

__all__ = [
    "QUESTION",
    "TASK_KIND",
    "Agent",
    "ask_all",
    "single",
    "reflection",
    "ensemble",
    "debate",
    "solver_tester",
    "router",
    "run_python",
    "submit",
    "extract_answer",
    "extract_code",
    "final_answer",
    "majority_vote",
    "StopRun",
]


class StopRun(BaseException):
    """The parent stopped this run (budget spent, prompt too long); ends the script."""


class Submitted(BaseException):
    """Raised by ``submit`` to end the script after the answer was handed over."""


def _request(kind: str, **payload: object) -> dict:
    from metaagentx.mas.channel import request

    reply = request({"type": kind, **payload})
    if reply.get("error"):
        raise StopRun(str(reply["error"]))
    return reply


class Agent:
    """One LLM agent with a role prompt and its own chat history.

    Example: ``critic = Agent("critic", "Check the solution.", temperature=0.7)``
    ``temperature`` / ``max_tokens`` override the run's sampling settings for this agent
    (the runtime may cap or ignore them).
    """

    def __init__(
        self,
        name: str,
        system_prompt: str = "",
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.name = str(name)
        self.system_prompt = str(system_prompt)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.messages: list[dict[str, str]] = []
        self.reset()

    def reset(self) -> None:
        """Forget the conversation (keeps the role prompt). Example: ``solver.reset()``"""
        self.messages = (
            [{"role": "system", "content": self.system_prompt}] if (self.system_prompt) else []
        )

    def _payload(self, message: str) -> dict:
        msgs = [*self.messages, {"role": "user", "content": str(message)}]
        return {
            "agent": self.name,
            "messages": msgs,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def _remember(self, message: str, reply: str) -> None:
        self.messages.append({"role": "user", "content": str(message)})
        self.messages.append({"role": "assistant", "content": reply})

    def ask(self, message: str) -> str:
        """Send ``message``, get the reply; both join this agent's history.

        Example: ``text = solver.ask("What is 2+3? End with \\boxed{}.")``
        """
        reply = _request("ask", **self._payload(message))["text"]
        self._remember(message, reply)
        return reply

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"


def ask_all(agents: list[Agent], messages: str | list[str]) -> list[str]:
    """Ask several distinct agents at once (one batched request); replies in order.

    Example: ``replies = ask_all([a, b, c], QUESTION)``
    """
    if isinstance(messages, str):
        messages = [messages] * len(agents)
    if len({id(a) for a in agents}) != len(agents):  # the same agent twice: keep history order
        return [a.ask(m) for a, m in zip(agents, messages)]
    asks = [a._payload(m) for a, m in zip(agents, messages)]
    texts = _request("ask_many", asks=asks)["texts"]
    for agent, message, text in zip(agents, messages, texts):
        agent._remember(message, text)
    return list(texts)


def _strip_answer(text: str) -> str:
    return text.strip().lstrip("*$: ").rstrip("*$. ")


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    while start != -1:
        i, depth = start + len("\\boxed{"), 1
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i:j].strip()
        start = text.rfind("\\boxed{", 0, start)  # unbalanced: try an earlier one
    return None


_ANSWER_RE = re.compile(r"(?:final answer|answer is)\s*[:=]?\s*([^\n]+)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def extract_answer(text: str) -> str:
    """The final answer in a reply: last ``\\boxed{...}`` (balanced braces), else the text after
    "Final answer:" / "answer is", else the last number, else the last non-empty line.

    Example: ``extract_answer("so x = \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"``
    """
    text = str(text)
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    found = _ANSWER_RE.findall(text)
    if found:
        answer = _strip_answer(found[-1])
        if answer:
            return answer
    numbers = _NUMBER_RE.findall(text)
    if numbers:
        return numbers[-1].replace(",", "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


_FENCE_RE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str) -> str:
    """The program in a reply: the last fenced code block (an unclosed final fence counts),
    else the whole text.

    Example: ``extract_code("```python\\nprint(1)\\n```") == "print(1)"``
    """
    blocks = [b.strip() for b in _FENCE_RE.findall(str(text)) if b.strip()]
    return blocks[-1] if blocks else str(text).strip()


def final_answer(text: str) -> str:
    """``extract_code`` for code tasks, ``extract_answer`` for math tasks.

    Example: ``submit(final_answer(solver.ask(QUESTION)))``
    """
    return extract_code(text) if TASK_KIND == "code" else extract_answer(text)


def _vote_key(answer: str) -> str:
    key = re.sub(r"\s+", "", str(answer)).strip("$").rstrip(".").lower()
    try:
        number = float(key.replace(",", ""))
        return str(int(number)) if number.is_integer() else repr(number)
    except ValueError:
        return key


def majority_vote(answers: list[str]) -> tuple[str, bool]:
    """The most common answer (ties: first seen) and whether it holds a strict majority.

    Example: ``majority_vote(["4", "4.0", "5"]) == ("4", True)``
    """
    if not answers:
        return "", False
    keys = [_vote_key(a) for a in answers]
    counts = Counter(keys)
    best = max(counts.values())
    winner = next(k for k in keys if counts[k] == best)
    return answers[keys.index(winner)], best * 2 > len(answers)


def _distinct(agents: list[Agent]) -> list[Agent]:
    """``[solver] * 3`` -> three independent copies (same name and prompt, own histories)."""
    out: list[Agent] = []
    for agent in agents:
        if any(a is agent for a in out):
            twin = Agent(
                agent.name,
                agent.system_prompt,
                temperature=agent.temperature,
                max_tokens=agent.max_tokens,
            )
            twin.messages = [dict(m) for m in agent.messages]
            agent = twin
        out.append(agent)
    return out


def single(agent: Agent, question: str) -> str:
    """One agent answers once. Example: ``submit(single(Agent("solver", "..."), QUESTION))``"""
    return final_answer(agent.ask(question))


def reflection(solver: Agent, critic: Agent, question: str, rounds: int = 1) -> str:
    """Solver answers; each round the critic reviews and the solver revises. The critic ends
    early by replying with the word CORRECT.

    Example: ``submit(reflection(solver, critic, QUESTION, rounds=2))``
    """
    reply = solver.ask(question)
    for _ in range(rounds):
        review = critic.ask(
            f"Problem:\n{question}\n\nProposed solution:\n{reply}\n\n"
            "Find any mistake. If the solution is right, reply CORRECT."
        )
        if re.search(r"\bCORRECT\b", review) and not re.search(r"\bINCORRECT\b", review):
            break
        reply = solver.ask(f"A reviewer says:\n{review}\n\nGive your corrected full solution.")
    return final_answer(reply)


def _judge(judge: Agent, question: str, replies: list[str]) -> str:
    listing = "\n\n".join(f"Candidate {i + 1}:\n{r}" for i, r in enumerate(replies))
    verdict = judge.ask(
        f"Problem:\n{question}\n\n{listing}\n\n"
        "Decide which candidate is right and give the final answer."
    )
    return final_answer(verdict)


def ensemble(agents: list[Agent], question: str, judge: Agent | None = None) -> str:
    """Every agent answers; a strict majority wins, otherwise the judge decides (no judge:
    the most common answer, first seen on ties). ``[a] * 3`` asks three independent copies.

    Example: ``submit(ensemble([Agent(f"s{i}", "...") for i in range(3)], QUESTION, judge))``
    """
    replies = ask_all(_distinct(list(agents)), question)
    answer, strict = majority_vote([final_answer(r) for r in replies])
    if strict or judge is None:
        return answer
    return _judge(judge, question, replies)


def debate(agents: list[Agent], question: str, rounds: int = 2, judge: Agent | None = None) -> str:
    """Agents answer, then for ``rounds - 1`` more rounds each sees the others' latest answers
    and updates; the judge (or a majority vote) gives the final answer.

    Example: ``submit(debate([Agent("a", "..."), Agent("b", "...")], QUESTION, rounds=2))``
    """
    agents = _distinct(list(agents))
    replies = ask_all(agents, question)
    for _ in range(max(0, rounds - 1)):
        prompts = []
        for i in range(len(agents)):
            others = "\n\n".join(
                f"{agents[j].name} said:\n{replies[j]}" for j in range(len(agents)) if j != i
            )
            prompts.append(
                f"Other agents answered:\n{others}\n\n"
                "Consider their reasoning and give your updated full answer."
            )
        replies = ask_all(agents, prompts)
    if judge is not None:
        return _judge(judge, question, replies)
    return majority_vote([final_answer(r) for r in replies])[0]


def _tester_prompt(question: str, program: str, result: str, test_input: str) -> str:
    shown_input = f"Input given:\n{test_input}\n\n" if test_input else ""
    return (
        f"Problem:\n{question}\n\nProgram:\n```python\n{program}\n```\n\n{shown_input}"
        f"Program output:\n{result}\n\nIs the program correct? Reply PASS, or FAIL and why."
    )


def solver_tester(solver: Agent, tester: Agent, question: str, rounds: int = 2) -> str:
    """The solver writes a Python program; it is run with ``run_python`` (code tasks: on an
    input the tester writes); the tester judges the output, and FAIL feedback goes back to the
    solver. Returns the program (code) or the program's last output line (math).

    Example: ``submit(solver_tester(coder, tester, QUESTION, rounds=2))``
    """
    reply = solver.ask(question + "\n\nWrite a complete Python program in a ```python block.")
    program = extract_code(reply)
    ran, ok, result = None, False, ""
    for _ in range(rounds):
        test_input = ""
        if TASK_KIND == "code":
            test_input = extract_code(
                tester.ask(
                    f"Problem:\n{question}\n\nWrite one small test input for a program solving it, "
                    "in a ``` block, nothing else."
                )
            )
        (result, ok), ran = _run(program, test_input), program
        verdict = tester.ask(_tester_prompt(question, program, result, test_input))
        if re.search(r"\bPASS\b", verdict) and not re.search(r"\bFAIL\b", verdict):
            break
        reply = solver.ask(
            f"Running your program gave:\n{result}\n\nTester feedback:\n"
            f"{verdict}\n\nFix it. Reply with the full program in a ```python block."
        )
        program = extract_code(reply)
    if TASK_KIND == "code":
        return program
    if ran != program:
        result, ok = _run(program, "")
    lines = [ln for ln in result.splitlines() if ln.strip()] if ok else []
    return extract_answer(lines[-1]) if lines else extract_answer(reply)


def router(
    classifier: Agent, routes: dict[str, Callable[[str], str] | Agent], question: str
) -> str:
    """The classifier picks one route label; that route answers. A route is an Agent (asked
    once) or a function of the question returning the answer.

    Example: ``submit(router(clf, {"easy": solver, "hard": lambda q: debate([a, b], q)}, QUESTION))``
    """
    labels = list(routes)
    if not labels:
        raise ValueError("router needs at least one route")
    choice = classifier.ask(
        f"Problem:\n{question}\n\nChoose the best way to solve it. "
        f"Reply with exactly one of: {', '.join(labels)}."
    ).lower()
    hits = [(choice.find(label.lower()), label) for label in labels if label.lower() in choice]
    chosen = min(hits)[1] if hits else labels[0]
    route = routes[chosen]
    return single(route, question) if isinstance(route, Agent) else route(question)


def run_python(code: str, stdin: str = "") -> str:
    """Run ``code`` in a fresh sandbox; returns its stdout, plus stderr when it failed.

    Example: ``out = run_python("print(sum(range(10)))")  # "45\\n"``
    """
    return _run(code, stdin)[0]


def _run(code: str, stdin: str) -> tuple[str, bool]:
    """(what ``run_python`` returns, whether the program exited cleanly in time)."""
    reply = _request("run_python", code=str(code), stdin=str(stdin))
    out = reply.get("stdout", "")
    if reply.get("timed_out"):
        return out + "\n[timed out]", False
    if reply.get("exit_code", 0) != 0:
        return (
            out + f"\n[exit code {reply.get('exit_code')}]\n{reply.get('stderr', '')[-2000:]}",
            False,
        )
    return out, True


def submit(answer: object) -> None:
    """Hand the final answer to the parent and end the script.

    Example: ``submit("42")`` (code tasks: ``submit(program_text)``)
    """
    _request("submit", answer=str(answer))
    raise Submitted()


def _script_globals(
    question: str, kind: str, allowed_modules: list[str], banned_builtins: list[str]
) -> dict:
    """The globals a script runs with (used by the runtime's prelude): the public API,
    ``QUESTION``, and builtins without ``banned_builtins`` whose ``import`` admits only
    ``allowed_modules`` (defense in depth behind the static check and the sandbox)."""
    import builtins

    global QUESTION, TASK_KIND
    QUESTION, TASK_KIND = str(question), str(kind)
    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if (
            level != 0
            or name.split(".")[0] not in allowed_modules
            and not (
                name == "metaagentx.mas.api"
                or name.startswith("metaagentx.mas.api.")
                or (name == "metaagentx.mas" and tuple(fromlist or ()) == ("api",))
            )
        ):
            raise ImportError(f"import of {name!r} is not allowed in a MAS script")
        return real_import(name, globals, locals, fromlist, level)

    safe = {k: v for k, v in vars(builtins).items() if k not in banned_builtins}
    safe["__import__"] = guarded_import
    namespace = {name: globals()[name] for name in __all__}
    namespace.update({"__builtins__": safe, "__name__": "__mas_script__"})
    return namespace
