// valid_bits: one "loaded" flag per entry of a buffer (the micro-op and weight buffers), so GEMM
// can tell an entry LOAD wrote since START from one it never wrote (ERR_UNLOADED).
//   * clr (START, soft reset) clears every flag at once: that is why they are flip-flops, not a
//     memory array (no block RAM clears in one cycle);
//   * set marks entry set_idx at the edge (LOAD writes the entry: data or padding);
//   * rd_val is the flag of entry rd_idx, combinationally: a bit of a register vector selected by
//     a multiplexer, which a memory array could not give (hw/rtl reads no memory array
//     combinationally) but a vector of flags can.
// IDX_BITS is given by the instantiator (the generated header's widths; DEPTH = 2**IDX_BITS in
// every shipped config, and an index >= DEPTH reads 0).
module valid_bits #(
    parameter DEPTH    = 64,
    parameter IDX_BITS = 6
) (
    input  wire                clk,
    input  wire                clr,
    input  wire                set,
    input  wire [IDX_BITS-1:0] set_idx,
    input  wire [IDX_BITS-1:0] rd_idx,
    output wire                rd_val
);
    reg [DEPTH-1:0] flags;

    always @(posedge clk) begin
        if (clr)
            flags <= {DEPTH{1'b0}};
        else if (set)
            flags[set_idx] <= 1'b1;
    end

    assign rd_val = flags[rd_idx];
endmodule
