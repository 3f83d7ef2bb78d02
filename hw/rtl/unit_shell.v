// unit_shell: the instruction shell every execution unit (load_unit, compute_unit, store_unit)
// runs its EXEC inside: the queue pop, the dependency-token handshakes and the status outputs.
//   U_IDLE : pops the head of the unit's queue (1 cycle)
//   U_WAIT : the unit's range checks (`range_bad`: `err` this cycle); waits until every token
//            named by pop_prev / pop_next is available, takes them together, enters EXEC
//   U_EXEC : the unit's own work; the unit says when it ends (`exec_done`: PUSH at the edge)
//            or stops for a halt (`exec_stop`: IDLE at the edge)
//   U_PUSH : pushes push_prev / push_next together, waiting while either is full (>= 1 cycle)
// The token flags are the instruction header's; a unit without a previous (next) stage sets
// HAS_PREV (HAS_NEXT) to 0, which ignores those flags (dispatch rejects them anyway).
`include "accel_params.vh"

module unit_shell #(
    parameter HAS_PREV = 1,  // the unit has a previous stage (pop_prev / push_prev name its queues)
    parameter HAS_NEXT = 1   // the unit has a next stage (pop_next / push_next)
) (
    input  wire                     clk,
    input  wire                     rst,
    input  wire                     clr,
    input  wire                     halt,
    // instruction queue
    input  wire                     q_empty,
    input  wire [`INSN_BITS+31:0]   q_dout,
    output wire                     q_pop,
    // tokens from / to the previous stage
    input  wire                     prev_avail,
    output wire                     prev_pop,
    input  wire                     prev_full,
    output wire                     prev_push,
    // tokens from / to the next stage
    input  wire                     next_avail,
    output wire                     next_pop,
    input  wire                     next_full,
    output wire                     next_push,
    // the unit's execution
    output wire [`INSN_BITS-1:0]    insn,       // the instruction held (WAIT to PUSH)
    output wire                     start,      // WAIT -> EXEC at this edge: the unit sets up EXEC
    input  wire                     range_bad,  // WAIT: a range check fails
    input  wire                     exec_done,  // EXEC: the work ends, PUSH from the next cycle
    input  wire                     exec_stop,  // EXEC: halted, IDLE from the next cycle
    input  wire                     exec_stuck, // EXEC: cannot progress (part of the deadlock check)
    // status
    output wire                     err,        // range_bad raised in WAIT
    output wire [31:0]              pc_out,     // pc held, all ones when none
    output wire                     idle,       // U_IDLE
    output wire                     exec,       // U_EXEC
    output wire                     stall,      // blocked on a token this cycle
    output wire                     stuck,      // cannot progress (idle+empty or blocked)
    output wire                     insn_done   // an instruction completed (its PUSH)
);
    localparam [1:0] U_IDLE = 2'd0, U_WAIT = 2'd1, U_EXEC = 2'd2, U_PUSH = 2'd3;

    reg [1:0]            state;
    reg [`INSN_BITS-1:0] insn_r;
    reg [31:0]           pc;

    wire pop_prev  = (HAS_PREV != 0) && insn_r[`F_HDR_POP_PREV_LO];
    wire pop_next  = (HAS_NEXT != 0) && insn_r[`F_HDR_POP_NEXT_LO];
    wire push_prev = (HAS_PREV != 0) && insn_r[`F_HDR_PUSH_PREV_LO];
    wire push_next = (HAS_NEXT != 0) && insn_r[`F_HDR_PUSH_NEXT_LO];

    wire tok_ok       = (!pop_prev || prev_avail) && (!pop_next || next_avail);
    wire push_blocked = (push_prev && prev_full) || (push_next && next_full);
    wire wait_go      = (state == U_WAIT) && !halt && !range_bad && tok_ok;
    wire push_go      = (state == U_PUSH) && !halt && !push_blocked;

    assign q_pop     = (state == U_IDLE) && !halt && !q_empty;
    assign prev_pop  = wait_go && pop_prev;
    assign next_pop  = wait_go && pop_next;
    assign prev_push = push_go && push_prev;
    assign next_push = push_go && push_next;

    assign insn      = insn_r;
    assign start     = wait_go;
    assign err       = (state == U_WAIT) && !halt && range_bad;
    assign pc_out    = (state == U_IDLE) ? 32'hFFFFFFFF : pc;
    assign idle      = (state == U_IDLE);
    assign exec      = (state == U_EXEC);
    assign stall     = ((state == U_WAIT) && !tok_ok) || ((state == U_PUSH) && push_blocked);
    assign stuck     = ((state == U_IDLE) && q_empty) || stall || ((state == U_EXEC) && exec_stuck);
    assign insn_done = push_go;

    always @(posedge clk) begin
        if (rst || clr) begin
            state  <= U_IDLE;
            insn_r <= {`INSN_BITS{1'b0}};
            pc     <= 32'd0;
        end else begin
            case (state)
                U_IDLE: begin
                    if (q_pop) begin
                        insn_r <= q_dout[`INSN_BITS-1:0];
                        pc     <= q_dout[`INSN_BITS+31:`INSN_BITS];
                        state  <= U_WAIT;
                    end
                end
                U_WAIT: begin
                    if (halt)
                        state <= U_IDLE;
                    else if (wait_go)
                        state <= U_EXEC;
                end
                U_EXEC: begin
                    if (exec_stop)
                        state <= U_IDLE;
                    else if (exec_done)
                        state <= U_PUSH;
                end
                U_PUSH: begin
                    if (halt || push_go)
                        state <= U_IDLE;
                end
            endcase
        end
    end
endmodule
