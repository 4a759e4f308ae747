# Out-of-context constraints for one accelerator alone, on any part
# (build/vivado/<module>/ooc_timing.tcl, `make vivado BOARD=ooc [PART=...]`): the timing answer
# without a board. Read only with `read_xdc -mode out_of_context`; in a block design or a Vitis
# platform the clock comes from the PS or the platform (see zcu106.xdc and alveo_kernel.xdc).
#
# The ports are left unconstrained (no set_input_delay/set_output_delay): in every system they
# meet interconnect registers whose timing only an in-context run knows.

# ap_clk at 300 MHz, the target of every board flow (rtl_gen.vivado.TARGET_FREQ_MHZ):
# a 3.333 ns period, so paths inside the accelerator are timed as they will be on the boards.
create_clock -period 3.333 -name ap_clk [get_ports ap_clk]
