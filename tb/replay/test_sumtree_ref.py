"""The helpers of the sum tree RTL tests (tb/sumtree_ref.py) checked themselves: stable op codes,
the command codec against Amaranth's packing, the reference's batches against single steps, and
the tree-dump check accepting the golden tree and rejecting drift."""

import numpy as np
import pytest

from rtl_gen.fixed import pack, unpack
from sumtree_ref import OP, RESPONDING, Codec, Reference, check_tree_dump, dump, random_ops
from sw.replay.spec import SumTreeConfig


def test_op_codes_are_stable():
    assert [o.name for o in OP] == ["SAMPLE", "SAMPLE_PRNG", "UPDATE", "INSERT", "INSERT_MAX",
                                    "READ", "DEBUG", "RESET"]
    assert [o.value for o in OP] == list(range(8))
    assert RESPONDING == {0, 1, 3, 4, 5, 6}


def test_codec_matches_amaranth_packing():
    cfg = SumTreeConfig(fanout=4, capacity=17, priority_width=12, priority_frac=4,
                        input_guard_bits=2, target_bits=10)
    codec = Codec(cfg)
    rng = np.random.default_rng(1)
    for cmd in random_ops(cfg, rng, 200):
        names = ["op", "level", "index", "priority", "target"]
        assert codec.encode(cmd) == pack(codec.cmd_layout, dict(zip(names, cmd)))
    word = pack(codec.rsp_layout, {"op": 6, "index": 19, "value": 1234, "empty": 0,
                                   "invalid": 1})
    assert codec.decode(word) == (6, 19, 1234, 0, 1)
    assert unpack(codec.rsp_layout, word)["index"] == 19


def test_reference_batches_equal_single_steps():
    cfg = SumTreeConfig(fanout=4, capacity=17, priority_width=12, priority_frac=4,
                        input_guard_bits=2, target_bits=10)
    cmds = random_ops(cfg, np.random.default_rng(2), 3000)
    batched, single = Reference(cfg, seed=5), Reference(cfg, seed=5)
    got = batched.run(cmds)
    want = [r for c in cmds for r in single.run([c])]
    assert got == want
    assert batched.flags == single.flags and batched.status == single.status
    assert sum(c[0] in RESPONDING for c in cmds) == len(got)


@pytest.mark.parametrize("fanout,capacity", [(2, 1), (4, 17), (2, 16)])
def test_dump_check_accepts_golden_and_rejects_drift(fanout, capacity):
    cfg = SumTreeConfig(fanout=fanout, capacity=capacity, priority_width=10, priority_frac=2)
    ref = Reference(cfg)
    ref.run(random_ops(cfg, np.random.default_rng(3), 200))
    good = ref.run(dump(cfg))
    check_tree_dump(cfg, good, ref)
    bad = list(good)
    bad[0] = bad[0][:2] + (bad[0][2] + 1,) + bad[0][3:]
    with pytest.raises(AssertionError):
        check_tree_dump(cfg, bad, ref)
