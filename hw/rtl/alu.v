// alu: the vector ALU datapath, LANES lanes of op(x, s) on 32-bit two's complement, where x is
// the destination lane and s the operand: the immediate sign-extended from 16 bits (use_imm) or
// the source lane. Combinational; the ops are those of docs/microarch.md "Data semantics". Each
// lane is an `alu_lane` (below): synthesis, which keeps the hierarchy, maps one lane and counts it
// LANES times instead of mapping every lane.
`include "accel_params.vh"

module alu (
    input  wire [3:0]                    op,
    input  wire                          use_imm,
    input  wire [15:0]                   imm,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  dst,     // x: the destination vector's lanes
    input  wire [`CFG_ACC_VEC_BITS-1:0]  src,     // the source vector's lanes (when !use_imm)
    output wire [`CFG_ACC_VEC_BITS-1:0]  result
);
    wire [31:0] imm32 = {{16{imm[15]}}, imm};
    genvar l;
    generate
        for (l = 0; l < `CFG_LANES; l = l + 1) begin : g_lane
            wire [31:0] sv = use_imm ? imm32 : src[l*32 +: 32];
            alu_lane u_lane (.op(op), .x(dst[l*32 +: 32]), .s(sv), .y(result[l*32 +: 32]));
        end
    endgenerate
endmodule

