from pathlib import Path

import pytest

from metaagentx.config import Config, ConfigError, dump_config, load_config, save_config


def test_defaults_and_overrides():
    cfg = load_config(
        None, ["--rl.k=10", "--rollout.m=2", "--model.name=foo/bar", "--rl.bf16=true"]
    )
    assert cfg.rl.k == 10 and cfg.rollout.m == 2 and cfg.model.name == "foo/bar" and cfg.rl.bf16
    assert cfg.rl.lr == Config().rl.lr


def test_unknown_key_names_choices(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text("[rl]\nkk = 3\n")
    with pytest.raises(ConfigError, match=r"unknown key 'rl.kk'.*valid keys: .*\bk\b"):
        load_config(p)
    with pytest.raises(ConfigError, match="unknown key 'nosuch'"):
        load_config(None, ["--nosuch.x=1"])


def test_wrong_type_and_literal():
    with pytest.raises(ConfigError, match="rl.k: expected an integer"):
        load_config(None, ["--rl.k=ten"])
    with pytest.raises(ConfigError, match=r"rl.schedule: 'zigzag' is not one of \['stagewise'"):
        load_config(None, ["--rl.schedule=zigzag"])
    with pytest.raises(ConfigError, match="must look like"):
        load_config(None, ["--rl.k"])


def test_roundtrip(tmp_path: Path):
    cfg = load_config(None, ["--rl.k=7", '--run.out_dir=a "b"'])
    save_config(cfg, tmp_path / "config.toml")
    assert load_config(tmp_path / "config.toml") == cfg
    assert "[rl]" in dump_config(cfg)


def test_float_accepts_int_and_missing_file(tmp_path: Path):
    assert load_config(None, ["--rl.lr=1"]).rl.lr == 1.0
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
