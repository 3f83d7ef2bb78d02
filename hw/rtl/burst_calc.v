// burst_calc: beats of the next burst = min(MAX_BURST, beats_left, beats to the next 4 KiB
// boundary). Addresses are bus-aligned, so only the offset within the 4 KiB page matters.
`include "accel_params.vh"

module burst_calc (
    input  wire [11:0] page_off,    // byte address [11:0]
    input  wire [31:0] beats_left,  // > 0 when the result is used
    output wire [8:0]  len          // 1..256 beats
);
    localparam [12:0] PAGE = 13'd4096;
    localparam [8:0]  MAXB = `CFG_MAX_BURST;

    wire [12:0] to_page  = (PAGE - {1'b0, page_off}) >> `CFG_BUS_BYTES_LOG2;
    wire [31:0] a        = (beats_left < {19'd0, to_page}) ? beats_left : {19'd0, to_page};
    assign len = (a < {23'd0, MAXB}) ? a[8:0] : MAXB;
endmodule
