"""The block registry (:mod:`sw.registry`): every block's configuration round trip, the register
map it names against the one its gateware builds, the manifest facts (formats, latency,
throughput) against the specs' cycle models, and the look-ups of shipped modules, families and
VLNVs with their errors."""

import json
import re

import pytest

from rtl_gen.blocks import GATEWARE, build, gateware
from sw import registry
from sw.gae import spec as gae_spec
from sw.learner.schedule import step_cycles
from sw.registry import BLOCKS, FAMILIES, SHIPPED
from sw.replay import spec as replay_spec

# Components built here and never elaborated: collect them while the filter hides their
# UnusedElaboratable warnings (tb/conftest.py, collect_components).
pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]

REPLAY_SMALL = dict(fanout=2, capacity=10, priority_width=12, priority_frac=4,
                    input_guard_bits=2, target_bits=16, max_batch=8)
LEARNER_SMALL = dict(sizes=[2, 4, 2], array=2, max_batch=4, sub_batch=2, axi_data_width=32)
GAE_SMALL = dict(n_pe=2, max_trajectories=4, capacity=8, axi_data_width=32)

#: A small configuration of every block, each parameter away from its default.
SMALL = {
    "gae-pe": dict(data_width=20, data_frac=10, coef_width=14, k=3, mode="interleaved"),
    "gae-accel": dict(GAE_SMALL, pe={"k": 1}),
    "gae-kernel": dict(GAE_SMALL, gmem_data_width=64, max_burst=4, max_outstanding=2),
    "sumtree": REPLAY_SMALL,
    "replay-accel": REPLAY_SMALL,
    "replay-kernel": dict(REPLAY_SMALL, gmem_data_width=64, max_burst=8),
    "tensor-unit": dict(rows=2, cols=3, in_width=8, a_frac=4, b_frac=5, acc_width=20,
                        out_width=10, out_frac=5, max_k=64),
    "learner": LEARNER_SMALL,
    "learner-kernel": dict(LEARNER_SMALL, gmem_data_width=64, max_burst=8),
    "dqn-trainer": dict(learner=dict(LEARNER_SMALL, loss="dqn"),
                        tree=dict(fanout=2, capacity=16, max_batch=4), append_window=4,
                        delay=2, trace_depth=4, storage_width=64),
}

#: (family, role) of every block.
ROLES = {"gae-pe": (None, "unit"), "gae-accel": ("gae", "accelerator"),
         "gae-kernel": ("gae", "kernel"), "sumtree": (None, "unit"),
         "replay-accel": ("replay", "accelerator"), "replay-kernel": ("replay", "kernel"),
         "tensor-unit": (None, "unit"), "learner": ("learner", "accelerator"),
         "learner-kernel": ("learner", "kernel"), "dqn-trainer": ("trainer", "accelerator")}

HOST_SIDE = [name for name, b in BLOCKS.items() if b.regmap is not None]


def test_the_blocks():
    assert list(BLOCKS) == list(SMALL) == list(ROLES)
    for name, b in BLOCKS.items():
        assert b.name == name and b.module == name.replace("-", "_")
        assert (b.family, b.role) == ROLES[name], name
        assert registry.block(name) is b
    assert set(FAMILIES) == {b.family for b in BLOCKS.values() if b.family}
    assert [n for n in BLOCKS if BLOCKS[n].role == "accelerator"] == ["gae-accel", "replay-accel",
                                                                      "learner", "dqn-trainer"]


@pytest.mark.parametrize("name", list(SMALL))
def test_config_round_trip(name):
    b = BLOCKS[name]
    cfg = b.config.from_dict(SMALL[name])
    d = cfg.to_dict()
    assert json.loads(json.dumps(d)) == d                       # plain JSON values
    assert b.config.from_dict(d) == cfg
    for key, value in SMALL[name].items():
        if isinstance(value, dict):
            assert {k: d[key][k] for k in value} == value, key
        else:
            assert d[key] == value, key
    assert cfg != b.config()                                    # the parameters were used
    assert b.config.from_dict(b.config().to_dict()) == b.config()
    with pytest.raises(ValueError, match="unknown .* parameter.*: no_such_parameter"):
        b.config.from_dict({**SMALL[name], "no_such_parameter": 1})


@pytest.mark.parametrize("name", list(SMALL))
def test_gateware_device_and_driver_names(name):
    b = BLOCKS[name]
    assert gateware(name) is gateware(b) is GATEWARE[name]
    assert GATEWARE[name].__module__.startswith("rtl_gen.")
    with pytest.raises(ValueError, match="what must be one of device, driver, reader, "
                                         "not 'gateware'"):
        b.load("gateware")
    for what in ("device", "driver"):
        ref = getattr(b, what)
        if ref is None:
            with pytest.raises(ValueError, match=f"block {name!r} has no {what}"):
                b.load(what)
        else:
            assert b.load(what).__name__ == ref.split(":")[1]
            assert ref.startswith(f"sw.{b.family}.{what}:")
    # the host side (device, driver, register map) exactly for the accelerators and kernels
    assert (b.regmap is not None) == (b.driver is not None) == (b.family is not None)
    assert (b.device is not None) == (b.role == "accelerator")


@pytest.mark.parametrize("name", HOST_SIDE)
def test_register_map_is_the_gateware_s(name):
    from rtl_gen.shell.signatures import arg_fields

    b = BLOCKS[name]
    cfg = b.config.from_dict(SMALL[name])
    component = build(b, cfg)
    rm = b.regmap(cfg)
    assert component.regmap == rm
    accel = b.accelerator
    assert accel.family == b.family and accel.role == "accelerator"
    base = b.base_regmap(cfg)
    if b.role == "kernel":
        assert base == accel.regmap(cfg.accel)
        assert base == build(accel, cfg.accel).regmap == component.accelerator.base
        assert rm.registers[:len(base)] == base.registers    # same offsets, fields, docs
        assert len(rm.registers) > len(base.registers)      # plus the shell's registers
        # what kernel.xml needs, against the gateware: the pointer registers, the master's
        # width and limits, the core's argument registers
        args = b.kernel_args(cfg)
        assert args["pointers"] == [{"name": "MEM_PTR", "port": "m_axi_gmem",
                                     "lo": "MEM_PTR_LO", "hi": "MEM_PTR_HI",
                                     "offset": component.regmap.offset("MEM_PTR_LO")}]
        assert args["pointers"][0]["offset"] == base.span
        assert args["m_axi"] == {"m_axi_gmem": {
            "data_width": len(component.m_axi_gmem_wdata), "max_burst": cfg.max_burst,
            "outstanding": cfg.max_outstanding}}
        assert args["scalars"] == list(dict.fromkeys(
            r.name for r, _ in arg_fields(component.accelerator.base)))
        # the shell's constants read the configuration: DMA_WINDOW is the accelerator's window
        host = component.accelerator.signature.members["host"].signature
        assert rm.info_values(cfg)["DMA_WINDOW"] == cfg.window_bytes \
            == component.accelerator.mem_words * host.data_width // 8
    elif name == "dqn-trainer":                     # an accelerator with its own master
        assert accel is b and base == rm
        args = b.kernel_args(cfg)
        assert args["pointers"] == [{"name": "BASE", "port": "m_axi_gmem", "lo": "BASE_LO",
                                     "hi": "BASE_HI", "offset": rm.offset("BASE_LO")}]
        assert rm.offset("BASE_HI") == rm.offset("BASE_LO") + 4
        assert args["m_axi"]["m_axi_gmem"]["data_width"] == len(component.core.m_axi_gmem_wdata)
        assert set(args["scalars"]) == {r.name for r, _ in arg_fields(rm)} - {"BASE_LO",
                                                                              "BASE_HI"}
    else:
        assert accel is b and base == rm and b.kernel_args(cfg) is None


def test_units_have_no_host_side():
    for name in ("gae-pe", "sumtree", "tensor-unit"):
        b = BLOCKS[name]
        cfg = b.config()
        assert b.accelerator is None and b.kernel_args(cfg) is None
        assert build(name, b.config.from_dict(SMALL[name])).signature is not None


def _formats(name, cfg):
    """The formats each block's manifest lists, from the configuration's own members."""
    if name == "gae-pe":
        f = {"data": cfg.data_format, "coef": cfg.coef_format}
    elif name.startswith("gae"):
        f = {"data": cfg.pe.data_format, "coef": cfg.pe.coef_format, "code": cfg.code_format,
             "offset_register": cfg.reg_format, "scale_register": cfg.scale_format,
             "result_scale_register": cfg.result_scale_format}
    elif name in ("sumtree", "replay-accel", "replay-kernel"):
        f = {"priority": cfg.priority_format, "input": cfg.input_format,
             "target": cfg.target_format, "root": cfg.level_formats[0]}
    elif name == "tensor-unit":
        f = {"a": cfg.a_format, "b": cfg.b_format, "acc": cfg.acc_format, "out": cfg.out_format}
    elif name == "dqn-trainer":
        n = cfg.learner.numerics
        f = {"activation": n.act_format, "weight": n.weight_format, "gradient": n.grad_format,
             "weight_gradient": n.wgrad_format, "discount": n.coef_format,
             "learning_rate": n.lr_format, "priority": cfg.tree.priority_format,
             "alpha_beta": cfg.coef_format, "epsilon": cfg.eps_format}
    else:
        n = cfg.numerics
        f = {"activation": n.act_format, "weight": n.weight_format, "gradient": n.grad_format,
             "weight_gradient": n.wgrad_format, "discount": n.coef_format,
             "learning_rate": n.lr_format}
    return {k: v.to_dict() for k, v in f.items()}


def _cycle_models(name, cfg):
    """(latency cycles, throughput per cycle) from the specs' cycle models."""
    if name == "gae-pe":
        return cfg.latency, 1
    if name == "gae-accel":
        return gae_spec.run_cycles(cfg, cfg.capacity, cfg.max_trajectories), cfg.n_pe
    if name == "gae-kernel":
        return (gae_spec.kernel_run_cycles(cfg, cfg.capacity, cfg.max_trajectories, latency=0),
                cfg.n_pe)
    if name == "sumtree":
        return cfg.latency, 1
    if name in ("replay-accel", "replay-kernel"):
        acfg = cfg.accel if name == "replay-kernel" else cfg
        return replay_spec.run_cycles(acfg, replay_spec.ReplayOp.SAMPLE, acfg.max_batch), 1
    if name == "tensor-unit":
        return cfg.latency, cfg.rows * cfg.cols
    if name == "dqn-trainer":
        from sw.trainer.schedule import sequential_step_cycles
        b = min(64, cfg.max_batch)
        cycles = sequential_step_cycles(cfg, b, writeback=b, inserts=1)
        return cycles, 1 / cycles
    acfg = cfg.accel if name == "learner-kernel" else cfg
    cycles = step_cycles(acfg, acfg.max_batch)
    return cycles, acfg.max_batch / cycles


CASES = [(m, b, p) for m, b, p in SHIPPED] + [(f"small {b}", b, p) for b, p in SMALL.items()]


@pytest.mark.parametrize("module,name,params", CASES, ids=[c[0] for c in CASES])
def test_manifest_facts_are_the_cycle_models(module, name, params):
    b = BLOCKS[name]
    cfg = b.config.from_dict(params)
    latency, throughput = b.latency(cfg), b.throughput(cfg)
    assert set(latency) == {"cycles", "of"} and set(throughput) == {"per_cycle", "unit"}
    assert latency["of"] and throughput["unit"]
    cycles, rate = _cycle_models(name, cfg)
    assert latency["cycles"] == cycles and cycles > 0
    assert throughput["per_cycle"] == rate
    assert b.formats(cfg) == _formats(name, cfg)


def test_kernel_runs_take_longer_than_their_accelerator_s():
    """A GAE kernel run adds its copies; replay and learner kernels (host-commanded copies)
    report the accelerator's cycles."""
    for m, name, params in SHIPPED:
        b = BLOCKS[name]
        if b.role != "kernel":
            continue
        cfg = b.config.from_dict(params)
        accel = b.accelerator.latency(cfg.accel)["cycles"]
        if b.family == "gae":
            assert b.latency(cfg)["cycles"] > accel, m
        else:
            assert b.latency(cfg)["cycles"] == accel, m


def test_shipped_lookups():
    assert registry.shipped() == SHIPPED
    assert registry.shipped_modules() == [m for m, _, _ in SHIPPED]
    assert registry.shipped_modules(family="gae") == ["gae_accel_n8", "gae_accel_n64",
                                                      "gae_kernel_n8", "gae_kernel_n64"]
    assert registry.shipped_modules(role="unit") == ["gae_pe_k2", "gae_pe_k3", "gae_pe_il4"]
    assert registry.shipped_modules(role="accelerator") == [
        "gae_accel_n8", "gae_accel_n64", "replay_accel_k16", "learner_cartpole_s4",
        "dqn_trainer_zcu106", "dqn_trainer_u250"]
    assert registry.shipped_modules(family="trainer") == ["dqn_trainer_zcu106",
                                                          "dqn_trainer_u250"]
    assert registry.shipped(family="replay", role="kernel") == [
        ("replay_kernel_k16", "replay-kernel", {"fanout": 16, "capacity": 1 << 16}),
        ("replay_kernel_k16_1m", "replay-kernel", {"fanout": 16, "capacity": 1 << 20})]
    assert registry.shipped(family="learner", role="unit") == []
    assert registry.shipped_modules(family="learner", role="kernel") == [
        "learner_kernel_s4", "learner_kernel_s8"]
    for module, name, params in SHIPPED:
        b, cfg = registry.shipped_config(module)
        assert b is BLOCKS[name] and cfg == b.config.from_dict(params)
        assert registry.block_of_module(module) is b
        assert registry.block_of_module(module, role=b.role) is b
    b, cfg = registry.shipped_config("gae_accel_n64")
    assert (cfg.n_pe, cfg.max_trajectories, cfg.capacity) == (64, 64, 1024)


def test_candidates_are_valid_and_not_shipped():
    """The DSE's unshipped picks: a valid configuration of their block and a module name no
    shipped module uses (their devices: tb/test_estimate.py)."""
    from sw.learner.spec import LearnerConfig
    shipped = {m for m, _, _ in SHIPPED}
    for module, name, params, device in registry.CANDIDATES:
        assert module not in shipped
        cfg = BLOCKS[name].config.from_dict(params)
        assert registry.candidate_config(module) == (BLOCKS[name], cfg, device)
        if isinstance(cfg, LearnerConfig):      # faster than the shipped learners it follows
            _, s8 = registry.shipped_config("learner_kernel_s8")
            assert step_cycles(cfg, 64) < step_cycles(s8, 64)


def test_block_of_module():
    # a block's default module name
    for name, b in BLOCKS.items():
        assert registry.block_of_module(b.module) is b
    assert registry.block_of_module("replay_kernel_k16").name == "replay-kernel"
    assert registry.block_of_module("replay_kernel_k16", role="accelerator") is None
    assert registry.block_of_module("learner", role="kernel") is None
    assert registry.block_of_module("my_kernel") is None


def test_family_vlnvs():
    import sw.driver as d

    assert registry.vlnv("gae_accel_n8") == "rlk:accel:gae_accel_n8:1.0"
    assert registry.family_vlnvs("gae") == ("rlk:accel:gae_accel_n8:1.0",
                                            "rlk:accel:gae_accel_n64:1.0")
    assert registry.family_vlnvs("replay") == ("rlk:accel:replay_accel_k16:1.0",)
    assert registry.family_vlnvs("learner") == ("rlk:accel:learner_cartpole_s4:1.0",)
    assert (d.GAE_VLNVS, d.REPLAY_VLNVS, d.LEARNER_VLNVS) == tuple(
        registry.family_vlnvs(f) for f in ("gae", "replay", "learner"))
    assert registry.family_vlnvs("no_such_family") == ()


def test_unknown_names_name_the_choices():
    with pytest.raises(ValueError, match=re.escape(
            "block must be one of gae-pe, gae-accel, gae-kernel, sumtree, replay-accel, "
            "replay-kernel, tensor-unit, learner, learner-kernel, dqn-trainer, not 'gae'")):
        registry.block("gae")
    modules = ", ".join(m for m, _, _ in SHIPPED)
    with pytest.raises(ValueError, match=re.escape(
            f"module must be a shipped module ({modules}), not 'gae_accel'")):
        registry.shipped_config("gae_accel")
    candidates = ", ".join(m for m, _, _, _ in registry.CANDIDATES)
    with pytest.raises(ValueError, match=re.escape(
            f"module must be a candidate ({candidates}), not 'learner_kernel_s8'")):
        registry.candidate_config("learner_kernel_s8")
