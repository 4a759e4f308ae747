"""Tests of the shells: rtl_gen/shell and sw/shell."""
