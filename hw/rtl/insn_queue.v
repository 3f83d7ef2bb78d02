// insn_queue: a generic synchronous FIFO (show-ahead: dout is the head entry while !empty).
// Used for the three instruction queues, each entry {pc[31:0], insn[127:0]}.
// A push is visible (empty falls) the cycle after it; push when full and pop when empty
// are ignored (the callers never do either).
`include "accel_params.vh"

module insn_queue #(
    parameter DEPTH = 8,   // entries, a power of two >= 2
    parameter AW    = 3,   // log2(DEPTH)
    parameter W     = 160  // entry width
) (
    input  wire          clk,
    input  wire          rst,
    input  wire          clr,
    input  wire          push,
    input  wire [W-1:0]  din,
    output wire          full,
    input  wire          pop,
    output wire [W-1:0]  dout,
    output wire          empty,
    output reg  [AW:0]   count
);
    reg [W-1:0]  mem [0:DEPTH-1];
    reg [AW-1:0] wr_ptr;
    reg [AW-1:0] rd_ptr;

    wire do_push = push && !full;
    wire do_pop  = pop && !empty;

    assign empty = (count == {(AW+1){1'b0}});
    assign full  = count[AW];  // count == DEPTH
    assign dout  = mem[rd_ptr];

    always @(posedge clk) begin
        if (do_push)
            mem[wr_ptr] <= din;
    end

    always @(posedge clk) begin
        if (rst || clr) begin
            wr_ptr <= {AW{1'b0}};
            rd_ptr <= {AW{1'b0}};
            count  <= {(AW+1){1'b0}};
        end else begin
            if (do_push)
                wr_ptr <= wr_ptr + 1'b1;
            if (do_pop)
                rd_ptr <= rd_ptr + 1'b1;
            if (do_push && !do_pop)
                count <= count + 1'b1;
            else if (do_pop && !do_push)
                count <= count - 1'b1;
        end
    end
endmodule
