"""Amaranth generators for the RL accelerator blocks (see README)."""
