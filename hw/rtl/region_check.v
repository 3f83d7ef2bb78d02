// region_check: is the byte range [lo, hi) inside one DRAM region whose ATTR allows the access?
// A region with SIZE 0 is unused. Combinational; the arithmetic is 64-bit so nothing wraps.
`include "accel_params.vh"

module region_check (
    input  wire [63:0]                       lo,
    input  wire [63:0]                       hi,
    input  wire                              need_write,  // 0: needs ATTR.READ, 1: ATTR.WRITE
    input  wire [`CFG_MAX_REGIONS*32-1:0]    rbase,
    input  wire [`CFG_MAX_REGIONS*32-1:0]    rsize,
    input  wire [`CFG_MAX_REGIONS*2-1:0]     rattr,
    output wire                              ok
);
    wire [`CFG_MAX_REGIONS-1:0] hit;

    genvar i;
    generate
        for (i = 0; i < `CFG_MAX_REGIONS; i = i + 1) begin : g_region
            wire [31:0] base = rbase[i*32 +: 32];
            wire [31:0] size = rsize[i*32 +: 32];
            wire [1:0]  attr = rattr[i*2 +: 2];
            wire [63:0] rlo  = {32'd0, base};
            wire [63:0] rhi  = {32'd0, base} + {32'd0, size};
            wire allowed = need_write ? attr[`ATTR_WRITE_BIT] : attr[`ATTR_READ_BIT];
            assign hit[i] = allowed && (size != 32'd0) && (lo >= rlo) && (hi <= rhi);
        end
    endgenerate

    assign ok = |hit;
endmodule
