// acc_buffer: the accumulator SRAM, ACC_DEPTH vectors of LANES x 32 bits (lane 0 in the low bits).
// Ports: load write; compute write + two combinational reads (dst, src); store combinational read.
// Writes take effect at the clock edge. Load and compute never write one index in the same
// cycle in a token-correct program; if they do, the compute write wins.
`include "accel_params.vh"

module acc_buffer (
    input  wire                          clk,
    // load unit write port
    input  wire                          ld_we,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  ld_addr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  ld_wdata,
    // compute unit: write port and two read ports
    input  wire                          cu_we,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_waddr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  cu_wdata,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_raddr_a,
    output wire [`CFG_ACC_VEC_BITS-1:0]  cu_rdata_a,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_raddr_b,
    output wire [`CFG_ACC_VEC_BITS-1:0]  cu_rdata_b,
    // store unit read port
    input  wire [`CFG_ACC_IDX_BITS-1:0]  st_raddr,
    output wire [`CFG_ACC_VEC_BITS-1:0]  st_rdata
);
    reg [`CFG_ACC_VEC_BITS-1:0] mem [0:`CFG_ACC_DEPTH-1];

    assign cu_rdata_a = mem[cu_raddr_a];
    assign cu_rdata_b = mem[cu_raddr_b];
    assign st_rdata   = mem[st_raddr];

    always @(posedge clk) begin
        if (ld_we)
            mem[ld_addr] <= ld_wdata;
        if (cu_we)
            mem[cu_waddr] <= cu_wdata;
    end
endmodule
