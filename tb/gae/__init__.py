"""Tests of the GAE block: sw/gae (golden model, quantization, device, driver) and rtl_gen/gae."""
