"""Tests of the host drivers' backends and register access: sw/driver."""
