"""Classify a designed MAS script into a structure, from its code alone.

    from metaagentx.mas.structure import classify_structure
    classify_structure(script)  # -> "single" | "reflection" | ... | "other"

The answer comes from the program's syntax tree, never from what the model says about it
(comments, agent names and role prompts are ignored):

1. **Blocks.** When the script calls one of the API blocks (``single``, ``reflection``,
   ``ensemble``, ``debate``, ``solver_tester``, ``router``) that block names the structure.
   ``router`` wins over the blocks it routes to; two different other blocks -> ``other``.
   A script that defines its own function with a block's name is analysed as hand-written.
2. **Hand-written patterns**, from a flow-insensitive data-flow analysis: which agents are
   created (``Agent(...)``, lists and dicts of them), which ``.ask`` / ``ask_all`` calls
   each makes, and whose answers flow into each ask's message, into ``run_python`` and into
   ``submit`` (order-insensitive, so loops and helper functions are followed):

   - ``solver_tester``: ``run_python`` runs text that an agent wrote;
   - ``router``: an agent's answer picks which agent is asked, by dict key or by an ``if``
     whose two branches ask different agents (an early exit is not a route);
   - ``single``: one agent asked once;
   - ``debate``: peers read each other's answers (a group whose asks depend on the group,
     or a feedback cycle in which at least two agents first answer on their own);
   - ``reflection``: a feedback cycle of two agents where only one answers first, a
     solver whose answer one critic revises, or one agent refining its own answer;
   - ``ensemble``: two or more independent answers combined by a judge or a vote (one
     agent sampled several times and voted counts: self-consistency);
   - anything else (pipelines of three agents, no asks at all, a syntax error) -> ``other``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field

STRUCTURES = ("single", "reflection", "ensemble", "debate", "solver_tester", "router", "other")
BLOCKS = ("single", "reflection", "ensemble", "debate", "solver_tester", "router")
_LOOPS = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.GeneratorExp,
    ast.DictComp,
)


def classify_structure(script: str) -> str:
    """Return the structure of ``script`` (one of ``STRUCTURES``); unparsable -> ``other``."""
    try:
        tree = ast.parse(script or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "other"
    own_defs = {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    blocks = {_call_name(n) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    blocks = {b for b in blocks if b in BLOCKS and b not in own_defs}
    if "router" in blocks:
        return "router"
    if len(blocks) == 1:
        return blocks.pop()
    if len(blocks) > 1:
        return "other"
    try:
        return _Flow(tree).classify()
    except RecursionError:  # absurdly deep code: no structure we could name
        return "other"


def _call_name(node: ast.Call) -> str:
    """``f(...)`` -> "f"; ``mod.f(...)`` -> "f"; anything else -> ""."""
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return ""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _targets(node: ast.AST) -> list[str]:
    """Variable names bound by an assignment target (tuples unpacked, subscripts -> base)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for e in node.elts for t in _targets(e)]
    if isinstance(node, (ast.Subscript, ast.Attribute)):
        return _targets(node.value)
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return []


@dataclass
class _Ask:
    agent: str  # agent id (a variable, a group, or an anonymous Agent(...) site)
    node: ast.Call
    in_loop: bool
    deps: set[str] = field(default_factory=set)  # agents whose answers reach the message


class _Flow:
    """Agents, their asks, and which agents' answers flow where (see module docstring)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.sizes: dict[str, int] = {}  # agent id -> how many agents it stands for
        self.dict_groups: set[str] = set()
        self.alias: dict[str, str] = {}  # loop variable -> agent group it iterates
        self._find_agents()
        self.asks = [a for n in ast.walk(tree) if isinstance(n, ast.Call) for a in self._asks_of(n)]
        self.taint: dict[str, set[str]] = defaultdict(set)
        self._propagate()

    # -- agents -------------------------------------------------------------------------
    def _find_agents(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind_agents(target, node.value)
            elif (
                isinstance(node, ast.Call)
                and _call_name(node) == "append"
                and isinstance(node.func, ast.Attribute)
                and node.args
                and self._is_agent(node.args[0])
            ):
                base = _targets(node.func.value)
                if base:
                    step = 2 if self._in_loop(node) else 1
                    self.sizes[base[0]] = self.sizes.get(base[0], 0) + step
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.For, ast.comprehension)):
                group = self._group_of(node.iter)
                for name in _targets(node.target):
                    if group:
                        self.alias[name] = group

    @staticmethod
    def _is_agent(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and _call_name(node) == "Agent"

    def _bind_agents(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, value.elts):
                self._bind_agents(t, v)
            return
        if not isinstance(target, ast.Name):
            return
        if self._is_agent(value):
            self.sizes[target.id] = 1
        elif isinstance(value, (ast.List, ast.Tuple)):
            n = sum(self._is_agent(e) for e in value.elts)
            if n:
                self.sizes[target.id] = n
        elif isinstance(value, ast.Dict):
            n = sum(self._is_agent(e) for e in value.values)
            if n:
                self.sizes[target.id] = n
                self.dict_groups.add(target.id)
        elif isinstance(value, (ast.ListComp, ast.GeneratorExp)) and self._is_agent(value.elt):
            self.sizes[target.id] = max(2, _literal_len(value.generators[0].iter))

    def _group_of(self, node: ast.AST) -> str | None:
        """The agent group an expression denotes (``agents``, ``agents[1:]``), if any."""
        if isinstance(node, ast.Call) and _call_name(node) in ("enumerate", "zip", "list"):
            for arg in node.args:
                group = self._group_of(arg)
                if group:
                    return group
            return None
        if isinstance(node, ast.Subscript):
            return self._group_of(node.value)
        if isinstance(node, ast.Name) and self.sizes.get(node.id, 0) >= 1:
            return node.id
        return None

    def _in_loop(self, node: ast.AST) -> bool:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, _LOOPS):
                return True
        return False

    # -- asks and data flow ----------------------------------------------------------------
    def _asks_of(self, node: ast.Call) -> list[_Ask]:
        """``agent.ask(m)`` -> one ask; ``ask_all(agents, m)`` -> one per agent (or group)."""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "ask":
            return [self._ask(node, node.func.value)]
        if _call_name(node) != "ask_all":
            return []
        recv = (
            node.args[0]
            if node.args
            else next((k.value for k in node.keywords if k.arg == "agents"), None)
        )
        if isinstance(recv, (ast.List, ast.Tuple)):
            return [self._ask(node, e) for e in recv.elts]
        return [self._ask(node, recv)] if recv is not None else []

    def _ask(self, node: ast.Call, recv: ast.AST) -> _Ask:
        if self._is_agent(recv):
            agent = f"<anonymous {recv.lineno}:{recv.col_offset}>"
            self.sizes[agent] = 1
        elif isinstance(recv, (ast.ListComp, ast.GeneratorExp)) and self._is_agent(recv.elt):
            agent = ast.unparse(recv)
            self.sizes[agent] = max(2, _literal_len(recv.generators[0].iter))
        elif isinstance(recv, ast.Name):
            agent = self.alias.get(recv.id, recv.id)
            self.sizes.setdefault(agent, 1)
        elif isinstance(recv, ast.Subscript) and self._group_of(recv.value):
            agent = self._group_of(recv.value) or ""
        else:
            agent = ast.unparse(recv)
            self.sizes.setdefault(agent, 1)
        return _Ask(agent, node, self._in_loop(node))

    def _expr_taint(self, node: ast.AST | None) -> set[str]:
        if node is None:
            return set()
        out: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                out |= self.taint.get(sub.id, set())
            elif isinstance(sub, ast.Call):
                out |= {a.agent for a in self._ask_by_node.get(id(sub), [])}
                out |= self.taint.get("<return " + _call_name(sub) + ">", set())
        return out

    def _propagate(self) -> None:
        self._ask_by_node: dict[int, list[_Ask]] = defaultdict(list)
        for a in self.asks:
            self._ask_by_node[id(a.node)].append(a)
        flows: list[tuple[list[str], ast.AST]] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                names = [t for tgt in node.targets for t in _targets(tgt)]
                flows.append((names, node.value))
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                flows.append((_targets(node.target), node.value))
            elif isinstance(node, (ast.For, ast.comprehension)):
                flows.append((_targets(node.target), node.iter))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend", "add", "update", "insert")
            ):
                flows.append((_targets(node.func.value), node))
            elif isinstance(node, ast.NamedExpr):
                flows.append((_targets(node.target), node.value))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return):
                        flows.append(([f"<return {node.name}>"], ret.value or node))
        changed = True
        while changed:
            changed = False
            for names, value in flows:
                src = self._expr_taint(value)
                for name in names:
                    if not src <= self.taint[name]:
                        self.taint[name] |= src
                        changed = True
        for ask in self.asks:
            ask.deps = set().union(
                *(self._expr_taint(a) for a in ask.node.args),
                *(self._expr_taint(k.value) for k in ask.node.keywords),
            )

    # -- patterns ----------------------------------------------------------------------
    def classify(self) -> str:
        if not self.asks:
            return "other"
        if self._runs_agent_code():
            return "solver_tester"
        if self._routes():
            return "router"
        agents = {a.agent for a in self.asks}
        total = sum(self.sizes.get(a, 1) for a in agents)
        if total == 1:
            return self._one_agent()
        edges = {(d, a.agent) for a in self.asks for d in a.deps}
        if any(s == t and self.sizes.get(s, 1) > 1 for s, t in edges):
            return "debate"
        cycle = _cycle_nodes({(s, t) for s, t in edges if s != t})
        if cycle:
            first = {a.agent for a in self.asks if a.agent in cycle and not a.deps}
            return "debate" if len(cycle) > 2 or len(first) >= 2 else "reflection"
        return self._acyclic(agents, edges)

    def _one_agent(self) -> str:
        ask = self.asks[0]
        if len(self.asks) == 1 and not ask.in_loop:
            return "single"
        if any(a.agent in a.deps for a in self.asks):
            return "reflection"
        return "ensemble"

    def _acyclic(self, agents: set[str], edges: set[tuple[str, str]]) -> str:
        sources = {a.agent for a in self.asks if not a.deps}
        width = sum(self.sizes.get(s, 1) for s in sources)
        submitted = set().union(set(), *(self._expr_taint(c) for c in self._calls("submit")))
        judged = any(
            len(a.deps & sources) >= 2 or any(self.sizes.get(d, 1) > 1 for d in a.deps & sources)
            for a in self.asks
        )
        voted = len(submitted & sources) >= 2 or any(
            self.sizes.get(s, 1) > 1 for s in submitted & sources
        )
        if width >= 2 and (judged or voted):
            return "ensemble"
        if len(agents) == 2 and len(sources) == 1 and len(edges) == 1:
            return "reflection"
        return "other"

    def _calls(self, name: str) -> list[ast.Call]:
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and _call_name(n) == name]

    def _runs_agent_code(self) -> bool:
        return any(self._expr_taint(c) for c in self._calls("run_python"))

    def _routes(self) -> bool:
        for ask in self.asks:
            recv = getattr(ask.node.func, "value", None)
            if (
                isinstance(recv, ast.Subscript)
                and ask.agent in self.dict_groups
                and self._expr_taint(recv.slice)
            ):
                return True
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.If, ast.IfExp)) and self._expr_taint(node.test):
                body = node.body if isinstance(node.body, list) else [node.body]
                orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
                then, other = self._asked_in(body), self._asked_in(orelse)
                if then and other and then != other:
                    return True
        return False

    def _asked_in(self, stmts: list[ast.AST]) -> set[str]:
        return {a.agent for s in stmts for a in self.asks if any(a.node is n for n in ast.walk(s))}


def _literal_len(node: ast.AST) -> int:
    """``range(3)`` -> 3, ``[a, b]`` -> 2, otherwise 0 (unknown)."""
    if isinstance(node, ast.Call) and _call_name(node) == "range" and node.args:
        last = node.args[-1] if len(node.args) == 1 else node.args[1]
        if isinstance(last, ast.Constant) and isinstance(last.value, int):
            return last.value if len(node.args) == 1 else last.value - _const(node.args[0])
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts)
    return 0


def _const(node: ast.AST) -> int:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) else 0


def _cycle_nodes(edges: set[tuple[str, str]]) -> set[str]:
    """Nodes that lie on some directed cycle of ``edges``."""
    succ: dict[str, set[str]] = defaultdict(set)
    for s, t in edges:
        succ[s].add(t)

    def reach(start: str) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            for nxt in succ[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return {n for n in list(succ) if n in reach(n)}
