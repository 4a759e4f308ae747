"""sw.jit: a module's kernels loaded once on first use, None without numba; the compiled
rounding as FixedFormat's."""

import numpy as np
import pytest

from sw import jit
from sw.fixed import FixedFormat


def test_built_once_and_none_without_numba(monkeypatch):
    calls = []
    cache = []
    assert jit.built(cache, lambda: calls.append(1) or "kernels") == "kernels"
    assert jit.built(cache, lambda: calls.append(2) or "again") == "kernels"
    assert calls == [1]
    monkeypatch.setattr(jit, "njit", lambda: None)
    cache = []
    assert jit.built(cache, lambda: pytest.fail("loaded without numba")) is None
    assert cache == [None]
    with pytest.raises(ImportError, match="numba is not installed"):
        jit.kernel(lambda: None)


@pytest.mark.skipif(jit.njit() is None, reason="numba is not installed")
def test_rounder_rounds_as_fixed_format():
    from sw.fixedkernels import rnd
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994, -3.75, 7.25])
    for mode, name in enumerate(jit.MODES):
        fmt = FixedFormat(width=16, frac=0, rounding=name)
        want = np.array([int(fmt.quantize(float(v))) for v in x])    # the scalar path
        got = np.array([int(rnd(float(v), mode)) for v in x])
        np.testing.assert_array_equal(got, want, err_msg=name)
