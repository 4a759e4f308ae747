"""Fixtures of the generated-script tests (test_package_ip.py, test_vivado_flows.py,
test_vivado_cli.py): an accelerator, its generated scripts, and their stubbed package_ip.tcl run.

test_trainer_bd.py defines its own ``acc``, ``scripts`` and ``packaged`` (one trainer), which
take precedence over these in that module.
"""

import pytest

from rtl_gen import vivado as V
from tclstub import run_stubbed
from vivado_cases import ACCELS, HDL


@pytest.fixture(scope="module", params=ACCELS)
def acc(request):
    return V.Accelerator.load(HDL / request.param)


@pytest.fixture
def scripts(acc, tmp_path):
    """The generated files of ``acc`` in a fresh directory (as build/vivado/<module>/)."""
    d = tmp_path / acc.module
    V.write_scripts(acc, d)
    return d


@pytest.fixture
def packaged(scripts):
    return run_stubbed(scripts / "package_ip.tcl")
