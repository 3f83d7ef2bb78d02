// insn_queue: a generic synchronous FIFO (show-ahead: dout is the head entry while !empty).
// Used for the three instruction queues, each entry {pc[31:0], insn[127:0]}.
// A push is visible (empty falls) the cycle after it; push when full and pop when empty
// are ignored (the callers never do either).
// Storage: DEPTH plain registers (one per entry, written when the write pointer selects it)
// and an explicit read multiplexer on rd_ptr, not a memory array: a FIFO this small is
// registers anyway, and hw/rtl reads no memory array combinationally (docs/synthesis.md).
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
    reg [AW-1:0] wr_ptr;
    reg [AW-1:0] rd_ptr;

    wire do_push = push && !full;
    wire do_pop  = pop && !empty;

    assign empty = (count == {(AW+1){1'b0}});
    assign full  = count[AW];  // count == DEPTH

    wire [DEPTH*W-1:0] entries;  // entry k in bits [k*W +: W]
    genvar gi;
    generate
        for (gi = 0; gi < DEPTH; gi = gi + 1) begin : g_entry
            localparam [AW-1:0] IDX = gi;
            reg [W-1:0] q;
            always @(posedge clk) begin
                if (do_push && wr_ptr == IDX)
                    q <= din;
            end
            assign entries[gi*W +: W] = q;
        end
    endgenerate

    reg [W-1:0] head;
    integer k;
    always @(*) begin
        head = entries[0 +: W];
        for (k = 1; k < DEPTH; k = k + 1)
            if (rd_ptr == k[AW-1:0])
                head = entries[k*W +: W];
    end
    assign dout = head;

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
