"""Tests of the shells: rtl_gen/shell (AXI4-Lite CSR, AXI4 slave, DMA, window) and sw/shell."""
