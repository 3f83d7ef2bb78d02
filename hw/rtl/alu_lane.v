// alu_lane: one lane of the vector ALU (alu.v), y = op(x, s) on 32-bit two's complement, x the
// destination lane, s the operand (docs/microarch.md "Data semantics"). Combinational. A module
// of its own so that synthesis, which keeps the hierarchy, maps one lane and counts it LANES times.
`include "accel_params.vh"

module alu_lane (
    input  wire [3:0]  op,
    input  wire [31:0] x,
    input  wire [31:0] s,
    output wire [31:0] y
);
    function [31:0] lane_op;
        input [3:0]  lop;
        input [31:0] lx;
        input [31:0] sv;
        reg   [31:0] sra;
        reg   [31:0] shl;
        reg   [31:0] lo;
        reg   [31:0] t;
        reg   [31:0] nsv;
        /* verilator lint_off UNUSEDSIGNAL */
        reg   [63:0] prod;  // MULHR uses bits [62:30] only: the sign bit and the bits below 2**30 drop out
        /* verilator lint_on UNUSEDSIGNAL */
        begin
            nsv = 32'd0 - sv;
            sra = $signed(lx) >>> (($signed(sv) > 32'sd31) ? 5'd31 : sv[4:0]);
            shl = ($signed(sv) < -32'sd31) ? 32'd0 : (lx << nsv[4:0]);
            lo  = nsv;
            t   = ($signed(lx) > $signed(lo)) ? lx : lo;
            // MULHR: (p + 2**30) >> 31 of the exact signed product p is p[62:31] plus the carry of bit 30
            prod = $signed({{32{lx[31]}}, lx}) * $signed({{32{sv[31]}}, sv});
            case (lop)
                `ALU_ADD:  lane_op = lx + sv;
                `ALU_SUB:  lane_op = lx - sv;
                `ALU_MUL:  lane_op = lx * sv;
                `ALU_MIN:  lane_op = ($signed(lx) < $signed(sv)) ? lx : sv;
                `ALU_MAX:  lane_op = ($signed(lx) > $signed(sv)) ? lx : sv;
                `ALU_SHR:  lane_op = sv[31] ? shl : sra;
                `ALU_CLIP: lane_op = ($signed(t) < $signed(sv)) ? t : sv;
                `ALU_MOV:  lane_op = sv;
                `ALU_MULHR: lane_op = prod[62:31] + {31'd0, prod[30]};
                `ALU_CLZ:  lane_op = {26'd0, clz32(sv)};
                default:   lane_op = lx;
            endcase
        end
    endfunction

    // CLZ: the leading zeros of s (32 for 0) by halving the window, a 5-level priority encoder:
    // each level adds its width when the top bits are zero and shifts them out. Declared after
    // lane_op so that the lines above keep their numbers (the mutation campaign's ids).
    function [5:0] clz32;
        input [31:0] cv;
        reg   [31:0] w;
        reg   [5:0]  n;
        begin
            w = cv;
            n = 6'd0;
            if (w[31:16] == 16'd0) begin n = n + 6'd16; w = w << 16; end
            if (w[31:24] == 8'd0)  begin n = n + 6'd8;  w = w << 8;  end
            if (w[31:28] == 4'd0)  begin n = n + 6'd4;  w = w << 4;  end
            if (w[31:30] == 2'd0)  begin n = n + 6'd2;  w = w << 2;  end
            if (w[31] == 1'b0)     n = n + 6'd1;
            if (cv == 32'd0)       n = 6'd32;
            clz32 = n;
        end
    endfunction

    assign y = lane_op(op, x, s);
endmodule
