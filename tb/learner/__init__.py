"""Tests of the learner block: sw/learner and rtl_gen/learner."""
