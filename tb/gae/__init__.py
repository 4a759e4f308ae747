"""Tests of the GAE block: sw/gae and rtl_gen/gae."""
