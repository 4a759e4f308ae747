# ZCU106 (xczu7ev-ffvc1156-2-e) constraints for the block design that
# build/vivado/<module>/zcu106_bd.tcl builds (`make vivado BOARD=zcu106`). Every command below
# says why it is there; this header says why the usual others are not.
#
# Already constrained by the block design, so NOT repeated here:
# - The clock. ap_clk is the PS's pl_clk0, set to 300 MHz in the block design
#   (CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ 300, from rtl_gen.vivado.TARGET_FREQ_MHZ;
#   the ZCU106 preset's IOPLL / 5 gives 299.997 MHz). The zynq_ultra_ps_e IP writes the
#   create_clock of clk_pl_0 from that setting; a second create_clock here would override it
#   with a period that no longer follows the PS configuration. No clocking wizard either: the
#   PS reaches 300 MHz directly, and an MMCM would only add a clock-domain crossing.
# - The reset. pl_resetn0 is asynchronous to pl_clk0, but proc_sys_reset synchronises it, and
#   its outputs (ap_rst_n, interconnect_aresetn) are registers in the pl_clk0 domain that the
#   accelerator samples synchronously. Those paths must be timed like any other: there is
#   deliberately no set_false_path on them (proc_sys_reset's own XDC covers its synchroniser).
# - The interrupt: a register in the pl_clk0 domain into axi_intc (same clock), whose output
#   goes to the PS's interrupt controller, constrained by the PS IP.
# - Pins: the design has no PL I/O; everything reaches the PL through the PS.

# Compress the bitstream: the design fills a small part of the device, so the file shrinks
# several times and the PS (fpga_manager, as PYNQ uses it) loads it faster. Logic unchanged.
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
