"""RegisterMapAccess: PYNQ-style register access, checked access by access.

Two targets: a register-level model of the CSR block with every access type (and registers that
mix them: ``rw`` beside ``wo``, ``rw`` beside ``ro_cor``), and the GAE accelerator's own map on
the :class:`~sw.gae.device.GoldenDevice`.
"""

import json

import numpy as np
import pytest

from sw.gae.spec import GaeCoreConfig
from sw.gae.spec import gae_register_map
from sw.regmap import Field, Register, RegisterMap
from sw.driver import GoldenDevice, RegisterAccessError, RegisterMapAccess

from driver_util import SMALL, ModelMmio, RecordingMmio


def demo_map():
    return RegisterMap.with_ap_ctrl_hs("demo", [
        Register.scalar("ARG0", doc="a 32-bit argument"),
        Register.scalar("NARROW", 5),
        Register("ARG1", None, (Field("LO", 0, 8, "rw", 0x5A), Field("HI", 16, 12, "rw", 0x123)),
                 "two fields around reserved bits"),
        Register("MIXED", None, (Field("MODE", 0, 2, "rw", 1), Field("KEY", 8, 8, "wo", 0x3C),
                                 Field("GO", 16, 1, "rw_sc"))),
        Register("EVENTS", None, (Field("ENABLE", 0, 4, "rw", 0x3), Field("SEEN", 8, 4, "ro_cor"),
                                  Field("ACK", 16, 4, "rw_tow"))),
        Register.scalar("COUNT", 16, "ro"),
    ])


@pytest.fixture
def demo():
    rm = demo_map()
    model = ModelMmio(rm)
    log = []
    return RegisterMapAccess(rm, RecordingMmio(model, log)), model, log


def test_construction_from_map_dict_json_and_file(tmp_path):
    rm = demo_map()
    model = ModelMmio(rm)
    path = tmp_path / "demo_regs.json"
    path.write_text(rm.to_json())
    for source in (rm, rm.to_dict(), rm.to_json(), str(path), path):
        acc = RegisterMapAccess(source, model)
        assert acc._regmap == rm
        assert acc.ARG1._offset == rm.offset("ARG1")
    with pytest.raises(ValueError, match="no register map JSON file"):
        RegisterMapAccess(str(tmp_path / "missing.json"), model)
    with pytest.raises(ValueError, match="not valid JSON"):
        RegisterMapAccess("{not json", model)
    with pytest.raises(TypeError, match="read32"):
        RegisterMapAccess(rm, object())
    with pytest.raises(TypeError, match="regmap must be"):
        RegisterMapAccess(42, model)
    assert json.loads(rm.to_json())["name"] == "demo"


def test_whole_register_fields_assign_directly(demo):
    acc, model, log = demo
    acc.ARG0 = 0xDEADBEEF
    assert log == [("w", 0x10, 0xDEADBEEF)]          # no read: nothing to preserve
    assert int(acc.ARG0) == 0xDEADBEEF and acc.ARG0 == 0xDEADBEEF
    assert acc.ARG0.ARG0 == 0xDEADBEEF
    acc["NARROW"] = 31
    assert model.q["NARROW", "NARROW"] == 31
    acc.NARROW = np.uint8(3)                          # numpy integers are integers
    acc.NARROW = True                                 # and so is bool
    assert model.q["NARROW", "NARROW"] == 1


@pytest.mark.parametrize("value", [32, -1, 1.0, "3", None])
def test_range_checks_name_register_field_and_range(demo, value):
    acc, _, log = demo
    with pytest.raises(ValueError, match=r"NARROW: value must be an integer in 0\.\.31 "
                                         r"\(5 bits\)"):
        acc.NARROW = value
    with pytest.raises(ValueError, match=r"ARG1\.LO: value must be an integer in 0\.\.255"):
        acc.ARG1.LO = 256 if isinstance(value, int) else value
    assert log == []                                  # nothing reached the bus


def test_partial_write_is_read_modify_write(demo):
    acc, model, log = demo
    acc.ARG1.HI = 0xABC
    off = acc.ARG1._offset
    assert log == [("r", off, 0x0123_005A), ("w", off, 0x0ABC_005A)]
    assert acc.ARG1.LO == 0x5A and acc.ARG1.HI == 0xABC
    acc.ARG1.write(LO=1, HI=2)                        # every rw field given: no read
    assert log[-1] == ("w", off, 0x0002_0001) and log[-2][0] == "r"


def test_wo_fields_come_from_the_shadow_and_cannot_be_read(demo):
    acc, model, log = demo
    acc.MIXED.MODE = 2                                # KEY (wo) from its reset, GO (rw_sc) 0
    off = acc.MIXED._offset
    assert log == [("w", off, 0x0000_3C02)]            # no other rw field: no read
    acc.MIXED.KEY = 0x77
    assert log[-1] == ("w", off, 0x0000_7702)
    assert model.q["MIXED", "KEY"] == 0x77 and model.q["MIXED", "MODE"] == 2
    with pytest.raises(RegisterAccessError,
                       match=r"MIXED\.KEY is write-only \('wo'\).*last written value is 119"):
        acc.MIXED.KEY
    assert int(acc.MIXED) == 0x0000_0002              # the hardware reads 0 there
    snap = acc.MIXED.read()
    with pytest.raises(RegisterAccessError, match="write-only"):
        snap.KEY
    assert snap.fields == {"MODE": 2, "GO": 0}


def test_rw_sc_and_rw_tow_are_never_written_back(demo):
    acc, model, log = demo
    acc.MIXED.GO = 1
    assert model.q["MIXED", "GO"] == 1
    acc.MIXED.MODE = 3                                # GO reads 1 but is written as 0
    assert log[-1] == ("w", acc.MIXED._offset, 0x0000_3C03)
    model.q["EVENTS", "ACK"] = 0b0110                 # the core raised two events
    acc.EVENTS.ACK = 0b0010                           # toggle (clear) one of them
    assert model.q["EVENTS", "ACK"] == 0b0100
    acc.EVENTS.ENABLE = 0xF                           # must not toggle ACK
    assert model.q["EVENTS", "ACK"] == 0b0100


def test_rw_beside_clear_on_read_uses_the_shadow_not_a_read(demo):
    acc, model, log = demo
    model.q["EVENTS", "SEEN"] = 0b1001                # events waiting to be read
    acc.EVENTS.ACK = 1
    assert all(kind == "w" for kind, *_ in log)       # no read: SEEN survives
    assert model.q["EVENTS", "SEEN"] == 0b1001
    assert log[-1] == ("w", acc.EVENTS._offset, 0x0001_0003)   # ENABLE from its reset
    snap = acc.EVENTS.read()                          # one read: sees and clears SEEN
    assert snap.SEEN == 0b1001 and acc.EVENTS.SEEN == 0


def test_read_only_fields_and_registers_raise_before_any_access(demo):
    acc, _, log = demo
    with pytest.raises(RegisterAccessError, match=r"EVENTS\.SEEN is read-only \('ro_cor'\)"):
        acc.EVENTS.SEEN = 1
    with pytest.raises(RegisterAccessError, match=r"COUNT\.COUNT is read-only"):
        acc.COUNT = 1
    with pytest.raises(RegisterAccessError, match=r"CTRL\.AP_DONE is read-only"):
        acc.CTRL.AP_DONE = 0
    with pytest.raises(RegisterAccessError, match="register COUNT is read-only"):
        acc.COUNT.write(5)
    assert log == []
    assert isinstance(RegisterAccessError("x"), AttributeError)


def test_raw_words_must_only_set_writable_bits(demo):
    acc, model, log = demo
    acc.ARG1 = 0x0FFF_00FF
    assert model.q["ARG1", "HI"] == 0xFFF
    with pytest.raises(ValueError, match=r"ARG1: raw word 0x00000100 sets bits 0x00000100 "
                                         r"that are reserved or read-only"):
        acc.ARG1 = 0x100
    with pytest.raises(ValueError, match=r"CTRL: raw word 0x00000004 sets bits"):
        acc.CTRL = 0x4                                # AP_IDLE: writing int(CTRL) back
    with pytest.raises(ValueError, match=r"0\.\.0xffffffff"):
        acc.ARG1 = 1 << 32
    with pytest.raises(ValueError, match="raw word or fields, not both"):
        acc.ARG1.write(1, LO=1)
    with pytest.raises(ValueError, match="nothing to write"):
        acc.ARG1.write()


def test_unknown_names_suggest_close_ones(demo):
    acc, _, _ = demo
    with pytest.raises(AttributeError, match=r"no register 'ARG2' \(did you mean ARG1, ARG0"):
        acc.ARG2
    with pytest.raises(AttributeError, match=r"no field 'HIGH' \(did you mean HI"):
        acc.ARG1.HIGH
    with pytest.raises(AttributeError, match="no field 'LOW'"):
        acc.ARG1.LOW = 1
    with pytest.raises(AttributeError, match="cannot set"):
        acc._mmio = None
    assert "ARG1" in acc and "NOPE" not in acc and len(acc) == len(demo_map())
    assert "HI" in dir(acc.ARG1) and "CTRL" in dir(acc)
    assert [r._register.name for r in acc][:2] == ["CTRL", "GIER"]


def test_reprs_list_fields_and_say_what_they_read(demo):
    acc, model, log = demo
    model.q["CTRL", "AP_DONE"] = 1
    text = repr(acc.CTRL)
    assert text.startswith("Register(CTRL @ 0x00 = 0x00000002: AP_START=0 [rw_sc], "
                           "AP_DONE=1 [ro_cor]")
    assert model.q["CTRL", "AP_DONE"] == 0            # a repr is a read, as on PYNQ
    assert "KEY=? [wo]" in repr(acc.MIXED)
    model.q["EVENTS", "SEEN"] = 5
    whole = repr(acc)
    assert "EVENTS: (not read: clear-on-read fields)" in whole
    assert "ARG1 = 0x0123005a: LO=90 [rw], HI=291 [rw]" in whole
    assert model.q["EVENTS", "SEEN"] == 5             # the map's repr skips ro_cor registers
    snap = acc.ARG1.read()
    assert repr(snap) == "ARG1=0x0123005a (LO=90 [rw], HI=291 [rw])"
    assert snap == 0x0123_005A and snap.HI == 0x123 and snap["LO"] == 0x5A


# -- on the accelerator's map and the golden device ------------------------------------------------
@pytest.fixture
def gae():
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg)
    log = []
    acc = RegisterMapAccess(gae_register_map(cfg), RecordingMmio(dev.control, log))
    return acc, dev, log


def test_gae_auto_restart_write_starts_nothing(gae):
    acc, dev, log = gae
    acc.CTRL.AUTO_RESTART = 0
    acc.CTRL.AUTO_RESTART = 1
    assert [k for k, *_ in log] == ["w", "w"]          # no read of CTRL (clear-on-read)
    assert log[-1] == ("w", 0, 0x80)
    assert dev.runs == 0 and acc.CTRL.AP_IDLE == 1
    acc.CTRL.AUTO_RESTART = 0


def test_gae_isr_toggle_clears_exactly_one_bit(gae):
    acc, dev, log = gae
    acc.NUM_TIMESTEPS = 0                              # an invalid run: done at once
    acc.NUM_TRAJECTORIES = 1
    acc.IP_IER = 0b11
    acc.GIER.ENABLE = 1
    acc.CTRL.AP_START = 1
    dev.sleep(1e-6)
    assert dev.interrupt and acc.IP_ISR.read().fields == {"AP_DONE": 1, "AP_READY": 1}
    acc.IP_ISR.AP_DONE = 1                             # writes 0b01: AP_READY untouched
    assert log[-1] == ("w", 0x0C, 0b01)
    assert acc.IP_ISR.read().fields == {"AP_DONE": 0, "AP_READY": 1} and dev.interrupt
    acc.IP_ISR.AP_READY = 1
    assert not dev.interrupt
    status = acc.STATUS.read()
    assert status.ERROR == 1 and acc.CTRL.read().AP_DONE == 1
    assert acc.CTRL.AP_DONE == 0                       # cleared by the read before


def test_gae_hardware_info_and_read_only(gae):
    acc, dev, _ = gae
    assert acc.HW_N_PE == 4 and acc.HW_FORMAT.CODE_BITS == 8
    assert acc.HW_MODE.AXI_BYTES == 8 and acc.HW_MODE.FULL_RESULTS == 0
    with pytest.raises(RegisterAccessError, match="read-only"):
        acc.HW_DEPTH = 1
    with pytest.raises(RegisterAccessError, match=r"STATUS\.ERROR is read-only"):
        acc.STATUS.ERROR = 0
    acc.GAMMA = (1 << 17) - 1
    with pytest.raises(ValueError, match=r"GAMMA: value must be an integer in 0\.\.131071 "
                                         r"\(17 bits\)"):
        acc.GAMMA = 1 << 17


def test_plain_register_write_same_as_field_write():
    """A register that is one writable field of its own name takes a shortcut on assignment:
    the same bus writes, shadow values and errors as writing that field."""
    rm = gae_register_map(GaeCoreConfig.from_dict(SMALL))
    plain = [r for r in rm if len(r.fields) == 1 and r.fields[0].name == r.name
             and r.fields[0].access not in ("ro", "ro_cor")]
    assert len(plain) >= 8
    logs, shadows, errors = [], [], []
    for shortcut in (True, False):
        log = []
        acc = RegisterMapAccess(rm, RecordingMmio(ModelMmio(rm), log))
        errs = []
        for r in plain:
            top = (1 << r.fields[0].width) - 1
            for v in (0, 1, top, np.int64(top // 3), top + 1, -1, 1.5, "x"):
                try:
                    if shortcut:
                        acc[r.name] = v
                    else:
                        acc._write_fields(r, {r.name: v})
                except ValueError as e:
                    errs.append(str(e))
        logs.append(log)
        shadows.append(dict(acc._shadow))
        errors.append(errs)
    assert logs[0] == logs[1] and shadows[0] == shadows[1] and errors[0] == errors[1]
    assert len(errors[0]) == 4 * len(plain)


def test_raw_words_by_name_for_hot_paths(demo):
    """``word``/``read_word``/``write_word``/``fields_of``: one access each, the checks and
    shadows of the attribute forms."""
    acc, model, log = demo
    w = acc.word("MIXED", MODE=2, KEY=0x11)
    assert w == 2 | 0x11 << 8 and not log                 # no bus access
    acc.write_word("MIXED", w)
    assert log == [("w", acc.MIXED._offset, w)]
    assert acc._shadow["MIXED", "KEY"] == 0x11 and acc._shadow["MIXED", "MODE"] == 2
    acc.MIXED.MODE = 3                                    # the wo KEY comes from the shadow
    assert model.q["MIXED", "KEY"] == 0x11
    log.clear()
    model.inputs["COUNT", "COUNT"] = 77
    assert acc.read_word("COUNT") == 77 and log == [("r", acc.COUNT._offset, 77)]
    word = acc.read_word("EVENTS")
    assert acc.fields_of("EVENTS", word) == {k: v for k, v in acc.EVENTS.read().fields.items()}
    assert set(acc.fields_of("MIXED", 0xFFFF_FFFF)) == {"MODE", "GO"}     # KEY is write-only
    log.clear()
    with pytest.raises(ValueError, match=r"ARG1: raw word 0x00000100 sets bits"):
        acc.write_word("ARG1", 0x100)
    with pytest.raises(ValueError, match=r"0\.\.0xffffffff"):
        acc.write_word("ARG0", -1)
    with pytest.raises(ValueError, match=r"NARROW: value must be an integer in 0\.\.31"):
        acc.word("NARROW", NARROW=32)
    with pytest.raises(RegisterAccessError, match="read-only"):
        acc.word("COUNT", COUNT=1)
    with pytest.raises(AttributeError, match=r"no register 'ARG2' \(did you mean ARG1"):
        acc.read_word("ARG2")
    assert not log


def test_write_word_changed_skips_what_this_map_wrote(demo):
    """Arguments are written only when they change: against what this map last wrote, by
    any of its paths; ``forget`` writes them all again."""
    acc, model, log = demo
    assert acc.write_word_changed("ARG0", 5) and acc.write_word_changed("ARG0", 6)
    assert not acc.write_word_changed("ARG0", 6)
    assert [e for e in log if e[0] == "w"] == [("w", 0x10, 5), ("w", 0x10, 6)]
    acc.ARG0 = 7                                     # through the attribute: seen
    log.clear()
    assert acc.write_word_changed("ARG0", 6) and log == [("w", 0x10, 6)]
    acc.forget()
    assert acc.write_word_changed("ARG0", 6) and model.q["ARG0", "ARG0"] == 6
    with pytest.raises(ValueError, match="only a register of rw fields"):
        acc.write_word_changed("CTRL", 1)            # AP_START is self-clearing
    with pytest.raises(ValueError, match="only a register of rw fields"):
        acc.write_word_changed("MIXED", 0)           # a write-only field


def test_maps_sharing_written_never_skip_each_others_writes(demo):
    """Two maps of one set of registers (two drivers of one device) share what was written:
    a word one wrote is not skipped by the other when it differs from the hardware's."""
    acc, model, log = demo
    shared = {}
    a = RegisterMapAccess(demo_map(), acc._mmio, written=shared)
    b = RegisterMapAccess(demo_map(), acc._mmio, written=shared)
    assert a.write_word_changed("ARG0", 5)
    assert b.write_word_changed("ARG0", 6)
    assert a.write_word_changed("ARG0", 5) and model.q["ARG0", "ARG0"] == 5
    assert not b.write_word_changed("ARG0", 5)
    with pytest.raises(TypeError, match="written must be a dict"):
        RegisterMapAccess(demo_map(), acc._mmio, written=[])


def test_drivers_of_one_device_share_what_was_written():
    from sw.driver import InstantDevice, ReplayDriver
    from sw.driver.common import written_registers

    dev = InstantDevice.for_kernel("replay_kernel_k16")
    one, two = ReplayDriver(dev), ReplayDriver(dev)
    assert one.register_map._written is two.register_map._written is written_registers(dev)
    one.register_map.write_word_changed("BATCH_SIZE", 7)
    two.register_map.write_word_changed("BATCH_SIZE", 9)
    assert one.register_map.write_word_changed("BATCH_SIZE", 7)      # not skipped
    assert dev.control.read32(one.register_map.BATCH_SIZE._offset) == 7
