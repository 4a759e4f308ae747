"""Tests of the replay block: sw/replay and rtl_gen/replay."""
