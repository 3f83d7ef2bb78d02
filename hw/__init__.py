"""The accelerator's hardware definition: config, ISA, CSR map, Program format and RTL."""
