// acc_buffer: the accumulator buffer, ACC_DEPTH vectors of LANES x 32 bits (lane 0 in the low
// bits), built from two `sram` copies (1 read + 1 write port each, registered read). The port
// plan (docs/microarch.md "The accumulator buffer's ports"):
//   * write port (both copies, so they stay identical): LOAD when it writes a vector (data or
//     padding), else COMPUTE (the ALU's write stage). LOAD has priority: `wr_busy` tells
//     COMPUTE that the port is LOAD's in this cycle.
//   * copy D read port: COMPUTE only (the ALU's destination operand).
//   * copy S read port: STORE when it reads a vector, else COMPUTE (the ALU's source
//     operand). STORE has priority: `src_busy` tells COMPUTE that the port is STORE's.
// DMA timing never depends on the ALU; COMPUTE waits (freezes its pipeline) in a cycle in
// which a port it needs is taken, so a conflict costs ALU cycles, never data. Two readers in
// one cycle or two writers in one cycle cannot happen (COMPUTE only uses a free port).
`include "accel_params.vh"

module acc_buffer (
    input  wire                          clk,
    // LOAD: write port (priority)
    input  wire                          ld_we,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  ld_addr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  ld_wdata,
    // COMPUTE: write (when the port is free), reads of dst (copy D) and src (copy S, when free)
    output wire                          wr_busy,
    output wire                          src_busy,
    input  wire                          cu_we,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_waddr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  cu_wdata,
    input  wire                          cu_re_dst,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_raddr_dst,
    output wire [`CFG_ACC_VEC_BITS-1:0]  cu_rdata_dst,
    input  wire                          cu_re_src,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  cu_raddr_src,
    // copy S's read data: the ALU's source operand or STORE's vector, whoever read last
    output wire [`CFG_ACC_VEC_BITS-1:0]  rdata_s,
    // STORE: copy S read port (priority)
    input  wire                          st_re,
    input  wire [`CFG_ACC_IDX_BITS-1:0]  st_raddr
);
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam VB  = `CFG_ACC_VEC_BITS;

    assign wr_busy  = ld_we;
    assign src_busy = st_re;

    wire           we    = ld_we || cu_we;
    wire [IDX-1:0] waddr = ld_we ? ld_addr : cu_waddr;
    wire [VB-1:0]  wdata = ld_we ? ld_wdata : cu_wdata;

    sram #(.WIDTH(VB), .DEPTH(`CFG_ACC_DEPTH), .ADDR_BITS(IDX)) u_copy_d (
        .clk(clk), .we(we), .waddr(waddr), .wdata(wdata),
        .re(cu_re_dst), .raddr(cu_raddr_dst), .rdata(cu_rdata_dst)
    );

    sram #(.WIDTH(VB), .DEPTH(`CFG_ACC_DEPTH), .ADDR_BITS(IDX)) u_copy_s (
        .clk(clk), .we(we), .waddr(waddr), .wdata(wdata),
        .re(st_re || cu_re_src), .raddr(st_re ? st_raddr : cu_raddr_src), .rdata(rdata_s)
    );
endmodule
