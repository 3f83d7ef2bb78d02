// gemm_lane: one output lane of GEMM's multiply-accumulate (gemm.v's E stage), combinational:
// y = acc + sum_k x[k] * w[k] over BLOCK_IN int8 pairs (lane k in bits [8k+7:8k]), wrapping at
// 32 bits. The products are 16-bit signed and summed in SUMW bits, enough for any BLOCK the
// config allows (|sum| <= BLOCK * 2**14), before the 32-bit add. gemm.v instantiates one per
// output lane (BLOCK_OUT of them): a module of its own so that synthesis, which keeps the
// hierarchy, maps one lane and counts it BLOCK_OUT times instead of mapping them all.
`include "accel_params.vh"

module gemm_lane (
    input  wire [31:0]                acc,
    input  wire [`CFG_BLOCK*8-1:0]    x,
    input  wire [`CFG_BLOCK*8-1:0]    w,
    output wire [31:0]                y
);
    localparam BLK  = `CFG_BLOCK;
    localparam SUMW = (BLK <= 16) ? 20 : ((BLK <= 256) ? 24 : 32);  // |sum| <= BLK * 2**14 fits

    function [31:0] dot;
        input [BLK*8-1:0] xv;
        input [BLK*8-1:0] wv;
        integer k;
        reg signed [15:0]     p;
        reg signed [SUMW-1:0] s;
        begin
            s = {SUMW{1'b0}};
            for (k = 0; k < BLK; k = k + 1) begin
                p = $signed(xv[k*8 +: 8]) * $signed(wv[k*8 +: 8]);
                s = s + {{(SUMW-16){p[15]}}, p};
            end
            dot = {{(32-SUMW+1){s[SUMW-1]}}, s[SUMW-2:0]};
        end
    endfunction

    assign y = acc + dot(x, w);
endmodule
