"""cocotb benches of the small RTL blocks, one module per block (run from tests/units/)."""
