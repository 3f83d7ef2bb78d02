"""cocotb testbench: runs Programs on the Verilator (or Icarus) build of the RTL."""
