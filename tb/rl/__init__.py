"""Tests of the RL programs: sw/rl."""
