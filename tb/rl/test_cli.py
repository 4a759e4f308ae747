"""The RL programs' command lines refuse bad input up front, naming the argument:
nothing trains, nothing is silently changed. In-process ``main(argv)``; no training run."""

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from sw.rl import dqn, ppo  # noqa: E402


def _refused(main, argv, capsys, monkeypatch):
    module = dqn if main is dqn.main else ppo

    def no_training(*args, **kwargs):
        raise AssertionError("training started before the argument was refused")

    monkeypatch.setattr(module, "train", no_training)    # refused up front, not after training
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    out = capsys.readouterr()
    assert "mean return" not in out.out
    return " ".join(out.err.split())


@pytest.mark.parametrize("argv,message", [
    (["--seeds", "0"], "--seeds must be a positive integer, not 0"),
    (["--seeds", "-2"], "--seeds must be a positive integer, not -2"),
    (["--lr", "nan"], "lr must be a finite positive number, not nan"),
    (["--lr", "-1"], "lr must be a finite positive number, not -1.0"),
    (["--total-steps", "0"], "total_steps must be a positive integer, not 0"),
    (["--total-steps", "500"], "total_steps must be above learning_starts (1000)"),
    (["--total-steps", "70000", "--backend", "cpu"],
     "total_steps (70000) must not exceed the replay capacity (65536)"),
    (["--total-steps", "70000", "--backend", "accel"],
     "total_steps (70000) must not exceed the replay capacity (65536)"),
    (["--priority-delay", "-1"], "priority_delay must be a non-negative integer, not -1"),
])
def test_dqn_cli_refuses_bad_arguments_up_front(capsys, monkeypatch, argv, message):
    err = _refused(dqn.main, argv, capsys, monkeypatch)
    assert message in err, err


@pytest.mark.parametrize("argv,message", [
    (["--seeds", "0"], "--seeds must be a positive integer, not 0"),
    (["--total-steps", "0"], "total_steps must be a positive integer, not 0"),
    (["--total-steps", "100"], "total_steps must be at least num_envs * num_steps (1024), one "
                               "iteration, not 100"),
    (["--module", "foo"], "--module: module must be a shipped GAE accelerator configuration"),
    (["--env", "Pendulum-v1"], "--env must be an environment with discrete actions and a flat "
                               "observation vector, not 'Pendulum-v1'"),
    (["--env", "NoSuchEnv-v0"], "--env: "),
])
def test_ppo_cli_refuses_bad_arguments_up_front(capsys, monkeypatch, argv, message):
    err = _refused(ppo.main, argv, capsys, monkeypatch)
    assert message in err, err


@pytest.mark.parametrize("cls,kw,message", [
    (dqn.DQNConfig, dict(lr=math.nan), "lr must be a finite positive number, not nan"),
    (dqn.DQNConfig, dict(reward_scale=math.inf), "reward_scale must be a finite positive"),
    (dqn.DQNConfig, dict(prio_eps=0.0), "prio_eps must be a finite positive number, not 0.0"),
    (dqn.DQNConfig, dict(beta=math.nan), r"beta must be a finite number >= 0, not nan"),
    (dqn.DQNConfig, dict(total_steps=500), r"total_steps must be above learning_starts"),
    (ppo.PPOConfig, dict(lr=math.nan), "lr must be a finite positive number, not nan"),
    (ppo.PPOConfig, dict(clip=-0.1), "clip must be a finite positive number, not -0.1"),
    (ppo.PPOConfig, dict(total_steps=100), r"total_steps must be at least num_envs \* "),
])
def test_configs_refuse_nan_and_runs_that_would_not_train(cls, kw, message):
    with pytest.raises(ValueError, match=message):
        cls(**kw)


@pytest.mark.parametrize("main,expected", [
    (dqn.main, ["--total-steps N", "(default: 30000)", "--lr LR", "(default: 0.02)",
                "--seeds N", "(default: 1)", "--backend {accel,cpu,both}", "(default: both)"]),
    (ppo.main, ["--total-steps N", "(default: 100000)", "--seeds N", "(default: 1)",
                "--module MODULE", "gae_accel_n8", "--env ENV", "(default: CartPole-v1)"]),
])
def test_help_shows_defaults_and_ranges(capsys, main, expected):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in expected:
        assert text in out, (text, out)
    assert "at least" in out                             # the ranges of --total-steps


def test_tiny_runs_complete_and_report(capsys):
    """A valid command line still trains (CPU backends, a second each) and says how many steps
    PPO runs before it runs them."""
    assert dqn.main(["--backend", "cpu", "--total-steps", "1010"]) == 0
    assert "10 gradient steps" in capsys.readouterr().out
    assert ppo.main(["--backend", "cpu", "--total-steps", "1500"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PPO on CartPole-v1: 1 iterations of 8 x 128 = 1,024 environment")
    assert "after 1024 steps" in out
