# Alveo U200 (xcu200-fsgd2104-2-e) and U250 (xcu250-figd2104-2L-e) kernel constraints.
#
# Intentionally no commands: `v++ --link` places a Vitis RTL kernel in the platform's dynamic
# region, and what an XDC would otherwise hold comes from elsewhere.
# - Clock: ap_clk is the platform's kernel clock 0, constrained by the platform. Its frequency
#   is chosen at link time, kernel_frequency=0:300 in build/vivado/<module>/alveo_u200.cfg and
#   alveo_u250.cfg (the same as `v++ --kernel_frequency 0:300`; platforms with fixed clocks use
#   `--clock.defaultFreqHz 300000000`, Vitis 2023.2 and later also `--freqhz=300MHz`), and XRT
#   programs the clock when it loads the xclbin. A create_clock in a kernel XDC would conflict
#   with the platform's.
# - Reset: ap_rst_n comes from the platform, synchronous to ap_clk: no false path.
# - Placement: a compute unit's SLR and memory bank are link options (slr=, sp= in the
#   [connectivity] section of the .cfg), not pblocks.
# - Pins: a kernel has none.
#
# For a timing answer without a platform, constraints/accel_ooc.xdc constrains the accelerator
# alone: `make vivado BOARD=ooc PART=xcu250-figd2104-2L-e`.
