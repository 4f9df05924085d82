"""Run a designed MAS: the designer call, then the script in the sandbox with every agent call
proxied to the generator and recorded with its exact tokens.

    design = await design(task, generator, sampling=SamplingParams(max_new_tokens=384))
    execution = await execute(design.script, task, generator, mas=cfg.mas)
    execution.outcome, execution.answer, execution.calls

Many executions may run concurrently on one event loop (``asyncio.gather``); their agent calls
reach the generator together and are batched by it. Each execution keeps its own records.

Outcomes (``metaagentx.types.Outcome``): SUBMITTED (the script called ``submit``), NO_ANSWER
(it ended without), REJECTED (failed ``check_script``; never run), RUNTIME_ERROR (it raised:
``reason`` is the last traceback line; or a request the generator refused), TIMEOUT (past
``mas.timeout_s``), BUDGET_EXCEEDED (more than ``mas.max_calls`` calls, ``mas.max_tokens``
generated tokens, ``max_tool_runs`` tool runs, or a prompt longer than the model accepts).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from metaagentx.backends.base import GenerationError, Generator, SamplingParams
from metaagentx.config import MASConfig
from metaagentx.mas import sandbox
from metaagentx.mas.script import ALLOWED_MODULES, FORBIDDEN_NAMES, check_script, extract_script
from metaagentx.types import Call, Design, Execution, Outcome, Task

DEFAULT_MAS = MASConfig()  # frozen: safe as a default argument
DEFAULT_SAMPLING = SamplingParams()
MAX_STDOUT_CHARS = 4000  # what an Execution keeps of the script's own prints

_PRELUDE = """\
from metaagentx.mas import api as _api
_g = _api._script_globals({question!r}, {kind!r}, {allowed!r}, {banned!r})
try:
    exec(compile({script!r}, "<mas-script>", "exec"), _g)
except _api.Submitted:
    pass
"""


def task_question(task: Task) -> str:
    """The text agents and the designer see: the prompt, plus starter code for code tasks."""
    if task.kind == "code" and task.starter_code.strip():
        return f"{task.prompt}\n\nStarter code:\n```python\n{task.starter_code}\n```"
    return task.prompt


def child_program(script: str, task: Task) -> str:
    """The program the sandbox runs: set up the API globals, then run ``script`` in them."""
    return _PRELUDE.format(
        question=task_question(task),
        kind=task.kind,
        allowed=list(ALLOWED_MODULES),
        banned=sorted(FORBIDDEN_NAMES),
        script=script,
    )


class _Stop(Exception):
    """Ends the run with a recorded outcome (raised inside the request handler)."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


@dataclass
class _Run:
    """The parent's authoritative record of one execution; ``handle`` serves the child."""

    generator: Generator
    mas: MASConfig
    sampling: SamplingParams
    agent_sampling: bool
    max_tool_runs: int
    calls: list[Call] = field(default_factory=list)
    tokens: int = 0
    reserved: int = 0  # calls admitted (some may still be generating)
    answer: str | None = None
    stop: _Stop | None = None
    tool_runs: int = 0

    async def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.stop is not None:
            return {"error": f"{self.stop.outcome.value}: {self.stop.reason}"}
        try:
            return await self._dispatch(msg)
        except _Stop as stop:
            self.stop = stop
            return {"error": f"{stop.outcome.value}: {stop.reason}"}

    async def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any]:
        kind = msg.get("type")
        if kind == "ask":
            return {"text": (await self._asks([msg]))[0]}
        if kind == "ask_many":
            asks = msg.get("asks")
            if not isinstance(asks, list) or not asks:
                raise _Stop(Outcome.RUNTIME_ERROR, "ask_many needs a non-empty list of asks")
            return {"texts": await self._asks(asks)}
        if kind == "run_python":
            return await self._run_python(msg)
        if kind == "submit":  # the first submit counts (it also ends the script)
            if self.answer is None:
                self.answer = str(msg.get("answer", ""))
            return {"ok": True}
        raise _Stop(Outcome.RUNTIME_ERROR, f"unknown request type {kind!r}")

    def _params(self, ask: dict[str, Any], index: int) -> SamplingParams:
        limit = self.mas.max_tokens - self.tokens
        if limit <= 0:
            raise _Stop(
                Outcome.BUDGET_EXCEEDED,
                f"token budget: {self.tokens} of mas.max_tokens={self.mas.max_tokens} used",
            )
        params = replace(self.sampling, max_new_tokens=min(self.sampling.max_new_tokens, limit))
        want_t, want_n = ask.get("temperature"), ask.get("max_tokens")
        try:
            if self.agent_sampling and want_t is not None:
                params = replace(params, temperature=float(want_t))
            if want_n is not None:
                params = replace(params, max_new_tokens=min(params.max_new_tokens, int(want_n)))
            if params.seed is not None:
                params = replace(params, seed=params.seed + index)
            params.validate()
        except (TypeError, ValueError) as err:  # GenerationError is a ValueError
            raise _Stop(Outcome.RUNTIME_ERROR, f"bad agent settings: {err}") from err
        return params

    async def _asks(self, asks: list[Any]) -> list[str]:
        if self.reserved + len(asks) > self.mas.max_calls:
            raise _Stop(
                Outcome.BUDGET_EXCEEDED,
                f"call budget: call {self.reserved + len(asks)}"
                f" > mas.max_calls={self.mas.max_calls}",
            )
        jobs = []
        for ask in asks:
            messages = ask.get("messages") if isinstance(ask, dict) else None
            if not isinstance(messages, list) or not all(
                isinstance(m, dict)
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
                for m in messages
            ):
                raise _Stop(Outcome.RUNTIME_ERROR, "an ask needs messages [{role, content}]")
            jobs.append(
                (
                    str(ask.get("agent", "agent")),
                    messages,
                    self._params(ask, self.reserved + len(jobs)),
                )
            )
        self.reserved += len(asks)
        done = await asyncio.gather(*(self._generate(*job) for job in jobs), return_exceptions=True)
        calls = [c for c in done if isinstance(c, Call)]
        self.calls.extend(calls)
        for err in done:
            if isinstance(err, BaseException):
                raise err
        self.tokens += sum(len(c.response_ids) for c in calls)
        if self.tokens > self.mas.max_tokens:  # concurrent asks overshot together
            raise _Stop(
                Outcome.BUDGET_EXCEEDED,
                f"token budget: {self.tokens} > mas.max_tokens={self.mas.max_tokens}",
            )
        return [c.text for c in calls]

    async def _generate(
        self, agent: str, messages: list[dict[str, str]], params: SamplingParams
    ) -> Call:
        start = time.perf_counter()
        limit = getattr(self.generator, "max_prompt_tokens", None)
        try:
            prompt_ids = self.generator.render(messages)
            if isinstance(limit, int) and len(prompt_ids) > limit:
                raise _Stop(
                    Outcome.BUDGET_EXCEEDED,
                    f"prompt_too_long: agent {agent!r} prompt "
                    f"has {len(prompt_ids)} tokens > {limit}",
                )
            result = await self.generator.generate(prompt_ids, params)
        except GenerationError as err:
            raise _Stop(Outcome.RUNTIME_ERROR, f"generation_error: {err}") from err
        return Call(
            role="executor",
            agent=agent,
            messages=[dict(m) for m in messages],
            prompt_ids=list(result.prompt_ids),
            response_ids=list(result.token_ids),
            logprobs=list(result.logprobs),
            finish_reason=result.finish_reason,
            text=result.text,
            latency_s=time.perf_counter() - start,
        )

    async def _run_python(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.tool_runs >= self.max_tool_runs:
            raise _Stop(
                Outcome.BUDGET_EXCEEDED,
                f"tool budget: more than {self.max_tool_runs} run_python calls",
            )
        self.tool_runs += 1
        result = await sandbox.run_untrusted_async(
            str(msg.get("code", "")),
            timeout_s=self.mas.tool_timeout_s,
            memory_mb=self.mas.memory_mb,
            stdin=str(msg.get("stdin", "")),
        )
        return {
            "stdout": result.stdout[-8000:],
            "stderr": result.stderr[-4000:],
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
        }


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _outcome(run: _Run, result: Any, mas: MASConfig) -> tuple[Outcome, str | None]:
    if run.stop is not None:
        return run.stop.outcome, run.stop.reason
    if run.answer is not None:
        return Outcome.SUBMITTED, None
    if result.timed_out or result.killed_reason == "cpu_time":
        return (
            Outcome.TIMEOUT,
            f"{result.killed_reason or 'timeout'}: ran past mas.timeout_s={mas.timeout_s}",
        )
    if result.killed_reason:  # output_limit, signal:...: the sandbox's reason says more
        return Outcome.RUNTIME_ERROR, f"killed: {result.killed_reason}"
    if result.exit_code != 0:
        return Outcome.RUNTIME_ERROR, _last_line(result.stderr) or f"exit {result.exit_code}"
    return Outcome.NO_ANSWER, "the script ended without calling submit"


async def execute(
    script: str,
    task: Task,
    generator: Generator,
    *,
    mas: MASConfig = DEFAULT_MAS,
    sampling: SamplingParams = DEFAULT_SAMPLING,
    agent_sampling: bool = True,
    max_tool_runs: int = 16,
) -> Execution:
    """Check ``script`` and run it once on ``task`` in the sandbox; every agent call goes to
    ``generator`` and is recorded. ``sampling`` is the executor's sampling (its
    ``max_new_tokens`` caps each call); ``agent_sampling=False`` ignores per-agent temperatures
    (so recorded logprobs match the trainer's temperature). A per-request ``sampling.seed``
    becomes ``seed + call index``."""
    start = time.perf_counter()
    reason = check_script(script)
    if reason is not None:
        return Execution(outcome=Outcome.REJECTED, reason=reason)
    run = _Run(generator, mas, sampling, agent_sampling, max_tool_runs)
    result = await sandbox.run_interactive(
        child_program(script, task),
        timeout_s=mas.timeout_s,
        memory_mb=mas.memory_mb,
        handler=run.handle,
    )
    outcome, why = _outcome(run, result, mas)
    return Execution(
        outcome=outcome,
        answer=run.answer if outcome == Outcome.SUBMITTED else None,
        calls=run.calls,
        reason=why,
        tool_runs=run.tool_runs,
        stdout=result.stdout[-MAX_STDOUT_CHARS:],
        wall_s=time.perf_counter() - start,
    )


def designer_messages(task: Task) -> list[dict[str, str]]:
    """The designer's chat: system = ``mas/prompts/designer.md``, user = the task and a
    reminder of the reply format (small models follow a trailing instruction best)."""
    system = resources.files("metaagentx.mas").joinpath("prompts/designer.md").read_text()
    kind = "programming problem" if task.kind == "code" else "math problem"
    return [
        {"role": "system", "content": system},
        {
            "role": "user",
            "content": f"Design a team for this {kind}:\n\n{task_question(task)}"
            "\n\nReply with the ```python script only; it must call submit(...).",
        },
    ]


def _classify(script: str) -> str:
    try:
        from metaagentx.mas.structure import classify_structure
    except ImportError:
        return "other"
    return classify_structure(script)


async def design(
    task: Task, generator: Generator, *, sampling: SamplingParams = DEFAULT_SAMPLING
) -> Design:
    """One designer call (role "designer") -> the extracted, checked script. A prompt the
    generator refuses gives ``rejected="prompt_too_long"`` and no call; a generator error of
    another kind is raised (it is our bug, not the model's)."""
    messages = designer_messages(task)
    start = time.perf_counter()
    prompt_ids = generator.render(messages)
    limit = getattr(generator, "max_prompt_tokens", None)
    if isinstance(limit, int) and len(prompt_ids) > limit:
        return Design(script="", structure="other", call=None, rejected="prompt_too_long")
    result = await generator.generate(prompt_ids, sampling)
    call = Call(
        role="designer",
        agent="designer",
        messages=messages,
        prompt_ids=list(result.prompt_ids),
        response_ids=list(result.token_ids),
        logprobs=list(result.logprobs),
        finish_reason=result.finish_reason,
        text=result.text,
        latency_s=time.perf_counter() - start,
    )
    script = extract_script(result.text) or ""
    return Design(
        script=script,
        structure=_classify(script) if script else "other",
        call=call,
        rejected=check_script(script),
    )


def solve(
    task: Task,
    generator: Generator,
    *,
    structure: str | None = None,
    mas: MASConfig = DEFAULT_MAS,
    sampling: SamplingParams = DEFAULT_SAMPLING,
    designer_sampling: SamplingParams | None = None,
) -> tuple[Design, Execution]:
    """Synchronous convenience: design (or take the ``structure`` template) and execute once."""
    from metaagentx.mas.templates import template_script

    async def both() -> tuple[Design, Execution]:
        if structure:
            d = Design(script=template_script(structure, task), structure=structure)
        else:
            d = await design(task, generator, sampling=designer_sampling or sampling)
        return d, await execute(d.script, task, generator, mas=mas, sampling=sampling)

    return asyncio.run(both())
