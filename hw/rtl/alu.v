// alu: the vector ALU datapath, LANES lanes of op(x, s) on 32-bit two's complement, where x is
// the destination lane and s the operand: the immediate sign-extended from 16 bits (use_imm) or
// the source lane. Combinational; the ops are those of docs/microarch.md "Data semantics".
`include "accel_params.vh"

module alu (
    input  wire [3:0]                    op,
    input  wire                          use_imm,
    input  wire [15:0]                   imm,
    input  wire [`CFG_ACC_VEC_BITS-1:0]  dst,     // x: the destination vector's lanes
    input  wire [`CFG_ACC_VEC_BITS-1:0]  src,     // the source vector's lanes (when !use_imm)
    output wire [`CFG_ACC_VEC_BITS-1:0]  result
);
    // one lane
    function [31:0] alu_lane;
        input [3:0]  lop;
        input [31:0] x;
        input [31:0] sv;
        reg   [31:0] sra;
        reg   [31:0] shl;
        reg   [31:0] lo;
        reg   [31:0] t;
        reg   [31:0] nsv;
        begin
            nsv = 32'd0 - sv;
            sra = $signed(x) >>> (($signed(sv) > 32'sd31) ? 5'd31 : sv[4:0]);
            shl = ($signed(sv) < -32'sd31) ? 32'd0 : (x << nsv[4:0]);
            lo  = nsv;
            t   = ($signed(x) > $signed(lo)) ? x : lo;
            case (lop)
                `ALU_ADD:  alu_lane = x + sv;
                `ALU_SUB:  alu_lane = x - sv;
                `ALU_MUL:  alu_lane = x * sv;
                `ALU_MIN:  alu_lane = ($signed(x) < $signed(sv)) ? x : sv;
                `ALU_MAX:  alu_lane = ($signed(x) > $signed(sv)) ? x : sv;
                `ALU_SHR:  alu_lane = sv[31] ? shl : sra;
                `ALU_CLIP: alu_lane = ($signed(t) < $signed(sv)) ? t : sv;
                `ALU_MOV:  alu_lane = sv;
                default:   alu_lane = x;
            endcase
        end
    endfunction

    wire [31:0] imm32 = {{16{imm[15]}}, imm};
    genvar l;
    generate
        for (l = 0; l < `CFG_LANES; l = l + 1) begin : g_lane
            wire [31:0] sv = use_imm ? imm32 : src[l*32 +: 32];
            assign result[l*32 +: 32] = alu_lane(op, dst[l*32 +: 32], sv);
        end
    endgenerate
endmodule
