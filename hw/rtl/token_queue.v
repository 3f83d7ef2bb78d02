// token_queue: a dependency-token counter between two stages (VTA's l2c, c2l, c2s, s2c).
// The producer pushes (only while !full), the consumer pops (only while avail); a push and a
// pop in one cycle leave the count unchanged. A push is visible to the consumer the next cycle.
`include "accel_params.vh"

module token_queue (
    input  wire                              clk,
    input  wire                              rst,
    input  wire                              clr,    // core clear (START / soft reset)
    input  wire                              push,
    input  wire                              pop,
    output wire                              avail,  // at least one token
    output wire                              full,   // TOKEN_QUEUE_DEPTH tokens held
    output reg  [`CFG_TOKEN_COUNT_BITS-1:0]  count
);
    localparam [`CFG_TOKEN_COUNT_BITS-1:0] DEPTH = `CFG_TOKEN_QUEUE_DEPTH;

    assign avail = (count != {`CFG_TOKEN_COUNT_BITS{1'b0}});
    assign full  = (count == DEPTH);

    always @(posedge clk) begin
        if (rst || clr)
            count <= {`CFG_TOKEN_COUNT_BITS{1'b0}};
        else if (push && !pop)
            count <= count + 1'b1;
        else if (pop && !push)
            count <= count - 1'b1;
    end
endmodule
