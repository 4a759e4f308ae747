"""Tests of the trainer: sw/trainer and rtl_gen/trainer."""
