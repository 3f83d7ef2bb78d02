// wgt_buffer: the weight buffer, WGT_DEPTH blocks of BLOCK_OUT x BLOCK_IN int8 (byte o*BLOCK + k =
// the weight of output lane o, input k; the DRAM byte order), built from BEATS_PER_WGT `sram`
// banks of one bus beat each: bank b holds bytes [b*BUS_BYTES, (b+1)*BUS_BYTES) of every block.
//   * write: LOAD writes each beat of a block into its bank as the beat arrives (we, bank), so a
//     block (the widest entry of any buffer: 2 kbit on the default config) is never assembled in
//     flip-flops; a pad block (zero) writes zeros into every bank at once.
//   * read: GEMM reads every bank at one address; rdata is the whole block, registered (one cycle),
//     as `sram` gives it.
// Reading a block while LOAD writes it is undefined, as for every `sram` (the tokens order them).
`include "accel_params.vh"

module wgt_buffer (
    input  wire                             clk,
    // LOAD
    input  wire                             we,
    input  wire                             zero,   // a pad block: all banks, zeros
    input  wire [15:0]                      bank,   // the beat written (when !zero)
    input  wire [`CFG_WGT_IDX_BITS-1:0]     waddr,
    input  wire [`CFG_BUS_WIDTH-1:0]        wdata,
    // GEMM
    input  wire                             re,
    input  wire [`CFG_WGT_IDX_BITS-1:0]     raddr,
    output wire [`CFG_WGT_BLOCK_BITS-1:0]   rdata
);
    localparam BUS = `CFG_BUS_WIDTH;

    genvar b;
    generate
        for (b = 0; b < `CFG_BEATS_PER_WGT; b = b + 1) begin : g_bank
            localparam [15:0] B = b;
            sram #(.WIDTH(BUS), .DEPTH(`CFG_WGT_DEPTH), .ADDR_BITS(`CFG_WGT_IDX_BITS)) u_bank (
                .clk(clk), .we(we && (zero || (bank == B))), .waddr(waddr),
                .wdata(zero ? {BUS{1'b0}} : wdata),
                .re(re), .raddr(raddr), .rdata(rdata[b*BUS +: BUS])
            );
        end
    endgenerate
endmodule
