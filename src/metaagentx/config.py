"""One config source: frozen dataclasses, loaded from TOML plus ``--section.key=value`` overrides.

    cfg = load_config("configs/cpu-demo.toml", ["--rl.k=10", "--rollout.m=2"])
    save_config(cfg, run_dir / "config.toml")

An unknown section or key, or a value of the wrong type, raises ``ConfigError`` naming the key
and the valid choices.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    """A config file or override names an unknown key or holds a value of the wrong type."""


@dataclass(frozen=True)
class ModelConfig:
    name: str = "smollm2-135m"  # "smollm2-135m" (embedded), a Hugging Face id, or a local folder
    dtype: str = (
        "float32"  # float32 | bfloat16 | float16: weights' dtype for generation and training
    )
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    designer_name: str = ""  # separate policy mode: the designer's model ("" = same as name)
    gradient_checkpointing: bool = False  # recompute activations in backward to save memory


@dataclass(frozen=True)
class GenerationConfig:
    backend: Literal["hf", "vllm", "openai", "scripted"] = "hf"  # which Generator serves calls
    temperature: float = 1.0  # sampling temperature for rollouts (0 = greedy)
    top_p: float = 1.0  # nucleus sampling mass
    designer_max_tokens: int = 384  # max new tokens of a designer call
    executor_max_tokens: int = 256  # max new tokens of an executor (agent) call
    max_batch_size: int = 16  # most requests the hf backend decodes together
    max_prompt_tokens: int = 2048  # longer prompts are an error (or a recorded outcome in a MAS)
    openai_base_url: str = "http://127.0.0.1:8000/v1"  # openai backend: server URL
    openai_api_key_env: str = "OPENAI_API_KEY"  # openai backend: env var holding the key
    timeout_s: float = 120.0  # openai backend: per-request timeout


@dataclass(frozen=True)
class MASConfig:
    max_calls: int = 8  # LLM calls one execution may make before it is stopped (budget outcome)
    max_tokens: int = 4096  # generated tokens one execution may use before it is stopped
    timeout_s: float = 120.0  # wall-clock limit of one script execution
    memory_mb: int = 512  # address-space limit of the sandboxed script process
    tool_timeout_s: float = 6.0  # limit of one run_python tool call
    concurrency: int = 32  # executions that may run at once


@dataclass(frozen=True)
class DataConfig:
    train: str = "generated:arith"  # dataset spec: path, benchmark name, HF id, or generated:<kind>
    eval: str = "generated:arith"  # held-out evaluation set spec
    train_limit: int = 0  # 0 = all tasks
    eval_limit: int = 32  # tasks evaluated by the demo / eval-after-train
    seed: int = 0  # seed of shuffling and generated tasks
    math_timeout_s: float = 5.0  # time limit of one math-verify comparison
    code_timeout_s: float = 6.0  # time limit of one code test


@dataclass(frozen=True)
class RolloutConfig:
    tasks_per_step: int = 4  # tasks in one training step
    m: int = 4  # designs per task
    n: int = 4  # executions per design
    mode: str = "designed"  # designed | fixed:<structure> (baselines, SA+GRPO)


@dataclass(frozen=True)
class RLConfig:
    steps: int = 60  # training steps
    schedule: Literal["stagewise", "coupled", "designer_only", "executor_only"] = "stagewise"
    k: int = 30  # stagewise: steps per phase
    first_phase: Literal["executor", "designer"] = "executor"  # stagewise: role trained first
    executor_group: Literal["task", "design"] = (
        "task"  # executor advantage group (design = ablation)
    )
    policy: Literal["shared", "separate"] = "shared"  # one model for both roles, or one per role
    lr: float = 1e-6  # AdamW peak learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    warmup_steps: int = 0  # linear learning-rate warmup
    max_grad_norm: float = 1.0  # gradient clipping
    clip_low: float = 0.2  # ratio clipped below at 1 - clip_low
    clip_high: float = 0.28  # ratio clipped above at 1 + clip_high
    kl_coef: float = 0.0  # weight of KL to a frozen reference (0 = no reference model)
    loss_agg: Literal["token_mean", "seq_mean"] = "token_mean"  # how token losses are averaged
    token_budget: int = 8192  # tokens per micro-batch when packing rows
    bf16: bool = False  # bf16 autocast for the update
    save_every: int = 10  # checkpoint every this many steps (and at the end)
    keep_checkpoints: int = 2  # newest checkpoints kept on disk


@dataclass(frozen=True)
class SFTConfig:
    epochs: int = 1  # passes over the demonstrations
    lr: float = 1e-5  # AdamW peak learning rate
    batch_tokens: int = 4096  # tokens per micro-batch
    tasks: int = 64  # training tasks demonstrations are generated for
    samples_per_task: int = 4  # designs tried per task
    teacher: str = ""  # teacher model (backend per generation.backend); "" = templates + policy


@dataclass(frozen=True)
class RunConfig:
    out_dir: str = "runs/default"  # where checkpoints, metrics and plots go
    seed: int = 0  # global seed
    log_tensorboard: bool = False  # also write TensorBoard events
    log_wandb: bool = False  # also log to Weights & Biases
    log_every: int = 1  # steps between progress lines


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    mas: MASConfig = field(default_factory=MASConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    run: RunConfig = field(default_factory=RunConfig)


def _check_value(key: str, tp: Any, value: Any) -> Any:
    """Return ``value`` converted to ``tp`` or raise ConfigError naming ``key``."""
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {list(choices)}")
        return value
    if origin in (typing.Union, types.UnionType):
        raise ConfigError(f"{key}: union types are not supported in config")  # pragma: no cover
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported field type {tp!r}")  # pragma: no cover


def _build(cls: type, data: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown key {full!r}; valid keys: {', '.join(names)}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{full}: expected a [{full}] table, got {value!r}")
            kwargs[key] = _build(tp, value, f"{full}.")
        else:
            kwargs[key] = _check_value(full, tp, value)
    return cls(**kwargs)


def _parse_scalar(text: str) -> Any:
    """Parse an override value as a TOML scalar; bare words are strings."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``["--rl.k=10", "--model.name=foo"]`` -> nested dict ``{"rl": {"k": 10}, ...}``."""
    nested: dict[str, Any] = {}
    for item in overrides:
        body = item[2:] if item.startswith("--") else item
        if "=" not in body:
            raise ConfigError(f"override {item!r} must look like --section.key=value")
        path, raw = body.split("=", 1)
        parts = path.split(".")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"override {item!r} must name section.key, e.g. --rl.k=10")
        nested.setdefault(parts[0], {})[parts[1]] = _parse_scalar(raw)
    return nested


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def config_from_dict(data: dict[str, Any]) -> Config:
    """Build a validated Config from a nested dict (TOML layout)."""
    return _build(Config, data, "")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load ``path`` (TOML; None = defaults) and apply ``--section.key=value`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: not valid TOML: {e}") from e
    data = _merge(data, parse_overrides(overrides or []))
    return config_from_dict(data)


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def dump_config(cfg: Config) -> str:
    """Render a Config as TOML text that ``load_config`` reads back to an equal Config."""
    lines: list[str] = []
    for section, values in config_to_dict(cfg).items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)


def save_config(cfg: Config, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(dump_config(cfg))
