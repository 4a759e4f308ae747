"""Weight averaging of the SPO weight server (sw.dist.weights): exact in the learners'
fixed-point format, one rounding of the exact integer mean."""

from fractions import Fraction

import numpy as np
import pytest

from sw.dist.weights import WeightServer, average_weights, mean_raw, to_float_layers
from sw.fixed import FixedFormat


def _reference(values, rounding):
    """The rounded mean of integers through exact fractions."""
    m = Fraction(sum(values), len(values))
    lo = m.numerator // m.denominator
    frac = m - lo
    if rounding == "floor":
        return lo
    if rounding == "half_up":
        return lo + (frac >= Fraction(1, 2))
    return lo + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2 == 1))


@pytest.mark.parametrize("rounding", ["half_up", "half_even", "floor"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_mean_raw_is_the_exactly_rounded_mean(rounding, n):
    rng = np.random.default_rng(n)
    mats = [rng.integers(-32768, 32768, (7, 5)) for _ in range(n)]
    # ties: for even n, make some sums end in exactly .5 (odd sum), negative ones included
    if n % 2 == 0:
        mats[0][0, :] = [-3, -1, 1, 3, 5]
        for m in mats[1:]:
            m[0, :] = 0
    got = mean_raw(mats, rounding)
    want = np.array([[_reference([int(m[i, j]) for m in mats], rounding) for j in range(5)]
                     for i in range(7)])
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64


def test_mean_raw_rounding_of_ties():
    a, b = np.array([-3, -1, 1, 3]), np.array([0, 0, 0, 0])      # means -1.5 -0.5 0.5 1.5
    np.testing.assert_array_equal(mean_raw([a, b], "half_up"), [-1, 0, 1, 2])
    np.testing.assert_array_equal(mean_raw([a, b], "half_even"), [-2, 0, 0, 2])
    np.testing.assert_array_equal(mean_raw([a, b], "floor"), [-2, -1, 0, 1])


def test_mean_raw_refuses_what_it_cannot_average():
    with pytest.raises(ValueError, match="rounding must be one of"):
        mean_raw([np.zeros(2, int)], "nearest")
    with pytest.raises(ValueError, match="at least one array"):
        mean_raw([])
    with pytest.raises(ValueError, match=r"mats\[1\] must be an integer array"):
        mean_raw([np.zeros(2, int), np.zeros(2)])
    with pytest.raises(ValueError, match=r"mats\[1\] has shape \(3,\)"):
        mean_raw([np.zeros(2, int), np.zeros(3, int)])


def test_average_weights_fixed_and_float():
    fmt = FixedFormat(16, 13, True, "half_even")
    rng = np.random.default_rng(0)
    nets = [[rng.integers(-2000, 2000, (5, 4)), rng.integers(-2000, 2000, (5, 2))]
            for _ in range(3)]
    avg = average_weights(nets, fmt)
    for l in range(2):
        np.testing.assert_array_equal(avg[l], mean_raw([n[l] for n in nets], "half_even"))
    floats = [[np.float32(rng.normal(size=(3, 2)))] for _ in range(4)]
    favg = average_weights(floats)
    assert favg[0].dtype == np.float32
    np.testing.assert_allclose(favg[0], np.mean([f[0] for f in floats], axis=0), rtol=1e-6)
    with pytest.raises(ValueError, match="every network must have 2 layers"):
        average_weights([nets[0], nets[1][:1]], fmt)


def test_weight_server_versions_and_restarts():
    fmt = FixedFormat(16, 13)
    net = [np.full((3, 2), 8192), np.full((3, 1), -8192)]
    ws = WeightServer()
    assert ws.get_raw() == (0, None)
    with pytest.raises(RuntimeError, match="no weights yet"):
        ws.average(net)
    ws.reset(net, fmt)
    v, params = ws.get_float()
    assert v == 0
    np.testing.assert_array_equal(params[0][0], np.ones((2, 2)))     # 8192 / 2**13
    np.testing.assert_array_equal(params[1][1], [-1.0])               # the bias row
    assert ws.get_float(0) == (0, None)                                 # already held
    other = [np.zeros((3, 2), int), np.zeros((3, 1), int)]
    avg = ws.average(net, other)
    assert ws.version == 1
    np.testing.assert_array_equal(avg[0], np.full((3, 2), 4096))
    np.testing.assert_array_equal(ws.get_raw()[1][1], np.full((3, 1), -4096))
    ws_f, bs_f = to_float_layers(avg, fmt)
    np.testing.assert_array_equal(ws.get_float()[1][0][0], ws_f[0])
    assert [ws.register("actor", 0), ws.register("actor", 1), ws.register("actor", 0)] == [0, 0, 1]
    assert ws.restarts() == {"actor 0": 1}
