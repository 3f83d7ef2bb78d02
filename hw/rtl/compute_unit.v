// compute_unit: executes ALU (vector ALU over the accumulator buffer) and FINISH.
//   U_IDLE : pops the head of the compute queue (1 cycle)
//   U_WAIT : ALU range check (ERR_SRAM_RANGE); waits until every token named by pop_prev
//            (l2c) and pop_next (s2c) is available, takes them together, enters EXEC
//   U_EXEC : ALU: one vector per cycle, iterations in loop order (i outer, j inner); the dst
//            and src vectors are read combinationally and the result written at the edge, so
//            a write is visible to the next iteration. max(1, iter_out*iter_in) cycles.
//            FINISH: stays until the load and store units are idle with empty queues and the
//            DRAM port is idle with no request (>= 1 cycle).
//   U_PUSH : pushes push_prev (c2l) and push_next (c2s) together, waiting while either is
//            full (>= 1 cycle); a FINISH completes here (`finish`).
`include "accel_params.vh"

module compute_unit (
    input  wire                            clk,
    input  wire                            rst,
    input  wire                            clr,
    input  wire                            halt,
    // compute queue
    input  wire                            q_empty,
    input  wire [`INSN_BITS+31:0]          q_dout,
    output wire                            q_pop,
    // tokens
    input  wire                            l2c_avail,
    output wire                            l2c_pop,
    input  wire                            s2c_avail,
    output wire                            s2c_pop,
    input  wire                            c2l_full,
    output wire                            c2l_push,
    input  wire                            c2s_full,
    output wire                            c2s_push,
    // FINISH condition: load/store idle with empty queues, DRAM port idle
    input  wire                            drained,
    // accumulator ports
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_raddr_dst,
    input  wire [`CFG_ACC_VEC_BITS-1:0]    acc_rdata_dst,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_raddr_src,
    input  wire [`CFG_ACC_VEC_BITS-1:0]    acc_rdata_src,
    output wire                            acc_we,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_waddr,
    output wire [`CFG_ACC_VEC_BITS-1:0]    acc_wdata,
    // status
    output wire                            err,
    output wire [7:0]                      err_code,
    output wire [31:0]                     pc_out,
    output wire                            idle,
    output wire                            exec,
    output wire                            stall,
    output wire                            stuck,
    output wire                            insn_done,
    output wire                            finish
);
    localparam [1:0] U_IDLE = 2'd0, U_WAIT = 2'd1, U_EXEC = 2'd2, U_PUSH = 2'd3;
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam VB  = `CFG_ACC_VEC_BITS;
    localparam [27:0] DEPTH = `CFG_ACC_DEPTH;

    reg [1:0]            state;
    reg [`INSN_BITS-1:0] insn;
    reg [31:0]           pc;

    // ---- fields
    wire            is_finish = (insn[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W] == `OP_FINISH);
    wire            pop_prev  = insn[`F_HDR_POP_PREV_LO];
    wire            pop_next  = insn[`F_HDR_POP_NEXT_LO];
    wire            push_prev = insn[`F_HDR_PUSH_PREV_LO];
    wire            push_next = insn[`F_HDR_PUSH_NEXT_LO];
    wire [3:0]      alu_op    = insn[`F_ALU_ALU_OP_LO +: `F_ALU_ALU_OP_W];
    wire            use_imm   = insn[`F_ALU_USE_IMM_LO];
    wire [13:0]     iter_out  = insn[`F_ALU_ITER_OUT_LO +: `F_ALU_ITER_OUT_W];
    wire [13:0]     iter_in   = insn[`F_ALU_ITER_IN_LO +: `F_ALU_ITER_IN_W];
    wire [SIB-1:0]  dst_base  = insn[`F_ALU_DST_BASE_LO +: `F_ALU_DST_BASE_W];
    wire [SIB-1:0]  src_base  = insn[`F_ALU_SRC_BASE_LO +: `F_ALU_SRC_BASE_W];
    wire [SIB-1:0]  dst_fo    = insn[`F_ALU_DST_FACTOR_OUT_LO +: `F_ALU_DST_FACTOR_OUT_W];
    wire [SIB-1:0]  dst_fi    = insn[`F_ALU_DST_FACTOR_IN_LO +: `F_ALU_DST_FACTOR_IN_W];
    wire [SIB-1:0]  src_fo    = insn[`F_ALU_SRC_FACTOR_OUT_LO +: `F_ALU_SRC_FACTOR_OUT_W];
    wire [SIB-1:0]  src_fi    = insn[`F_ALU_SRC_FACTOR_IN_LO +: `F_ALU_SRC_FACTOR_IN_W];
    wire [15:0]     imm       = insn[`F_ALU_IMM_LO +: `F_ALU_IMM_W];

    // ---- range check: the largest index touched, when iter_out*iter_in > 0
    wire        no_iter = (iter_out == 14'd0) || (iter_in == 14'd0);
    wire [27:0] dst_max = {{(28-SIB){1'b0}}, dst_base}
                        + {14'd0, iter_out - 14'd1} * {{(28-SIB){1'b0}}, dst_fo}
                        + {14'd0, iter_in - 14'd1} * {{(28-SIB){1'b0}}, dst_fi};
    wire [27:0] src_max = {{(28-SIB){1'b0}}, src_base}
                        + {14'd0, iter_out - 14'd1} * {{(28-SIB){1'b0}}, src_fo}
                        + {14'd0, iter_in - 14'd1} * {{(28-SIB){1'b0}}, src_fi};
    wire range_bad = !is_finish && !no_iter && ((dst_max >= DEPTH) || (!use_imm && (src_max >= DEPTH)));

    // ---- tokens
    wire tok_ok       = (!pop_prev || l2c_avail) && (!pop_next || s2c_avail);
    wire push_blocked = (push_prev && c2l_full) || (push_next && c2s_full);
    wire wait_go      = (state == U_WAIT) && !halt && !range_bad && tok_ok;
    wire push_go      = (state == U_PUSH) && !halt && !push_blocked;

    assign q_pop    = (state == U_IDLE) && !halt && !q_empty;
    assign l2c_pop  = wait_go && pop_prev;
    assign s2c_pop  = wait_go && pop_next;
    assign c2l_push = push_go && push_prev;
    assign c2s_push = push_go && push_next;

    assign err       = (state == U_WAIT) && !halt && range_bad;
    assign err_code  = `ERR_SRAM_RANGE;
    assign pc_out    = (state == U_IDLE) ? 32'hFFFFFFFF : pc;
    assign idle      = (state == U_IDLE);
    assign exec      = (state == U_EXEC);
    assign stall     = ((state == U_WAIT) && !tok_ok) || ((state == U_PUSH) && push_blocked);
    assign stuck     = ((state == U_IDLE) && q_empty) || stall ||
                       ((state == U_EXEC) && is_finish && !drained);
    assign insn_done = push_go;
    assign finish    = push_go && is_finish;

    // ---- loop state
    reg [13:0]    i;
    reg [13:0]    j;
    reg [IDX-1:0] d_row;
    reg [IDX-1:0] d;
    reg [IDX-1:0] s_row;
    reg [IDX-1:0] s;
    wire last_j = (j + 14'd1 == iter_in);
    wire last_i = (i + 14'd1 == iter_out);
    wire alu_step = (state == U_EXEC) && !halt && !is_finish && !no_iter;

    // ---- vector ALU: one lane function, LANES instances
    function [31:0] alu_lane;
        input [3:0]  op;
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
            case (op)
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
    wire [VB-1:0] result;
    genvar l;
    generate
        for (l = 0; l < `CFG_LANES; l = l + 1) begin : g_lane
            wire [31:0] sv = use_imm ? imm32 : acc_rdata_src[l*32 +: 32];
            assign result[l*32 +: 32] = alu_lane(alu_op, acc_rdata_dst[l*32 +: 32], sv);
        end
    endgenerate

    assign acc_raddr_dst = d;
    assign acc_raddr_src = s;
    assign acc_we        = alu_step;
    assign acc_waddr     = d;
    assign acc_wdata     = result;

    always @(posedge clk) begin
        if (rst || clr) begin
            state <= U_IDLE;
            insn  <= {`INSN_BITS{1'b0}};
            pc    <= 32'd0;
            i     <= 14'd0;
            j     <= 14'd0;
            d_row <= {IDX{1'b0}};
            d     <= {IDX{1'b0}};
            s_row <= {IDX{1'b0}};
            s     <= {IDX{1'b0}};
        end else begin
            case (state)
                U_IDLE: begin
                    if (q_pop) begin
                        insn  <= q_dout[`INSN_BITS-1:0];
                        pc    <= q_dout[`INSN_BITS+31:`INSN_BITS];
                        state <= U_WAIT;
                    end
                end
                U_WAIT: begin
                    if (halt)
                        state <= U_IDLE;
                    else if (wait_go) begin
                        state <= U_EXEC;
                        i     <= 14'd0;
                        j     <= 14'd0;
                        d_row <= dst_base[IDX-1:0];
                        d     <= dst_base[IDX-1:0];
                        s_row <= src_base[IDX-1:0];
                        s     <= src_base[IDX-1:0];
                    end
                end
                U_EXEC: begin
                    if (halt)
                        state <= U_IDLE;
                    else if (is_finish) begin
                        if (drained)
                            state <= U_PUSH;
                    end else if (no_iter) begin
                        state <= U_PUSH;
                    end else if (last_j) begin
                        j     <= 14'd0;
                        i     <= i + 14'd1;
                        d_row <= d_row + dst_fo[IDX-1:0];
                        d     <= d_row + dst_fo[IDX-1:0];
                        s_row <= s_row + src_fo[IDX-1:0];
                        s     <= s_row + src_fo[IDX-1:0];
                        if (last_i)
                            state <= U_PUSH;
                    end else begin
                        j <= j + 14'd1;
                        d <= d + dst_fi[IDX-1:0];
                        s <= s + src_fi[IDX-1:0];
                    end
                end
                default: begin  // U_PUSH
                    if (halt || push_go)
                        state <= U_IDLE;
                end
            endcase
        end
    end

    // opcode bits beyond FINISH/ALU (GEMM is rejected at dispatch) and reserved bits
    wire unused_compute = ^{insn[`INSN_BITS-1:`ALU_USED_BITS], insn[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W]};
endmodule
