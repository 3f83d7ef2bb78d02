// compute_unit: executes ALU (vector ALU over the accumulator buffer), GEMM (gemm.v), FINISH and BARRIER
// inside unit_shell (IDLE -> WAIT -> EXEC -> PUSH; pop_prev takes l2c, pop_next s2c, push_prev
// gives c2l, push_next c2s).
//   WAIT : range checks (ERR_SRAM_RANGE): the ALU's largest indices; GEMM's micro-op range
//   EXEC : ALU: a pipeline over the synchronous accumulator SRAM, iterations in loop order
//          (i outer, j inner), one vector per cycle in steady state:
//            READ    : the dst (copy D) and src (copy S) addresses go into the SRAM's read register;
//            EXECUTE : next cycle, the ALU on the read data; its result is
//            WRITE   : written at the end of that same cycle (the SRAM's write register).
//          Iteration k+1 is read at the edge at which iteration k is written, so a read of the
//          index just written (distance-1 read-after-write, e.g. acc[j] += acc[j-1]) takes
//          the written vector from `fw_data` instead of the SRAM (forwarding); distance >= 2
//          reads find it in the SRAM. So the sequential semantics hold at no cost.
//          The pipeline advances only in a cycle in which its ports are free (`go`): the write
//          port is LOAD's when LOAD writes a vector, copy S's read port is STORE's when STORE
//          reads one (only an ALU with a src operand needs it). A frozen cycle does nothing;
//          copy S's read data is kept in `op_src` (STORE's read would overwrite it).
//          EXEC = the cycles up to and including the (N+1)-th free cycle (N = iter_out*iter_in:
//          N reads, N writes one cycle behind); 1 cycle when N = 0.
//          GEMM: the three-stage pipeline of gemm.v (micro-op, operands, MACs) on the micro-op,
//          input and weight buffers and the accumulator's copy D and write port, frozen in a
//          cycle in which LOAD writes the accumulator (it never needs copy S); EXEC = the cycles
//          up to and including the (N+2)-th free cycle, 1 cycle when N = 0. A faulting
//          iteration raises `err` (ERR_UNLOADED / ERR_SRAM_RANGE) in its A-stage cycle.
//          FINISH: stays until the load and store units are idle with empty queues and the
//          DRAM port is idle with no request (>= 1 cycle).
//          BARRIER: `arrived` while drained as FINISH; ends in the cycle in which every core has
//          arrived (`bar_go`, from barrier.v), so all cores leave it at the same edge.
//   PUSH : a FINISH completes here (`finish`), a BARRIER too (`bar_done`: FETCH resumes).
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
    // FINISH condition: load/store idle with empty queues, DRAM port idle (for this core)
    input  wire                            drained,
    // BARRIER: this core waits, drained, at a BARRIER (`arrived`); every core has (`bar_go`)
    output wire                            arrived,
    input  wire                            bar_go,
    output wire                            bar_done,
    // accumulator ports (acc_buffer's port plan: wr_busy / src_busy = taken by LOAD / STORE)
    input  wire                            acc_wr_busy,
    input  wire                            acc_src_busy,
    output wire                            acc_re_dst,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_raddr_dst,
    input  wire [`CFG_ACC_VEC_BITS-1:0]    acc_rdata_dst,
    output wire                            acc_re_src,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_raddr_src,
    input  wire [`CFG_ACC_VEC_BITS-1:0]    acc_rdata_src,
    output wire                            acc_we,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_waddr,
    output wire [`CFG_ACC_VEC_BITS-1:0]    acc_wdata,
    // GEMM's buffers: micro-ops, inputs, weights (read ports) and the loaded flags
    output wire                            uop_re,
    output wire [`CFG_UOP_IDX_BITS-1:0]    uop_raddr,
    input  wire [`CFG_UOP_BITS-1:0]        uop_rdata,
    input  wire                            uop_valid,
    output wire                            inp_re,
    output wire [`CFG_INP_IDX_BITS-1:0]    inp_raddr,
    input  wire [`CFG_INP_VEC_BITS-1:0]    inp_rdata,
    output wire                            wgt_re,
    output wire [`CFG_WGT_IDX_BITS-1:0]    wgt_raddr,
    input  wire [`CFG_WGT_BLOCK_BITS-1:0]  wgt_rdata,
    input  wire                            wgt_valid,
    // status
    output wire                            err,
    output wire [7:0]                      err_code,
    output wire [31:0]                     pc_out,
    output wire                            idle,
    output wire                            exec,
    output wire                            stall,
    output wire                            port_wait,  // EXEC frozen: a buffer port is LOAD's or STORE's
    output wire                            gemm_exec,  // EXEC of a GEMM (the probe)
    output wire                            gemm_busy,  // EXEC of a GEMM up to an error cycle (GEMM_BUSY)
    output wire                            gemm_op,    // a GEMM block multiplied and written (GEMM_OPS)
    output wire                            stuck,
    output wire                            insn_done,
    output wire                            finish
);
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam VB  = `CFG_ACC_VEC_BITS;
    localparam [27:0] DEPTH = `CFG_ACC_DEPTH;

    wire [`INSN_BITS-1:0] insn;
    wire                  start;
    wire                  exec_done;
    wire                  exec_stop;
    wire                  insn_end;

    // ---- fields
    wire [`F_HDR_OPCODE_W-1:0] opcode = insn[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W];
    wire            is_finish = (opcode == `OP_FINISH);
    wire            is_bar    = (opcode == `OP_BARRIER);
    wire            is_gemm   = (opcode == `OP_GEMM);
    wire            is_alu    = !is_finish && !is_bar && !is_gemm;  // the queue holds ALU, GEMM, FINISH, BARRIER
    wire [`F_ALU_ALU_OP_W-1:0] alu_op = insn[`F_ALU_ALU_OP_LO +: `F_ALU_ALU_OP_W];
    wire            use_imm   = insn[`F_ALU_USE_IMM_LO];
    wire [`F_ALU_ITER_OUT_W-1:0] iter_out = insn[`F_ALU_ITER_OUT_LO +: `F_ALU_ITER_OUT_W];
    wire [`F_ALU_ITER_IN_W-1:0] iter_in  = insn[`F_ALU_ITER_IN_LO +: `F_ALU_ITER_IN_W];
    // bases and factors have SIB bits; those above an accumulator index matter to the range
    // check only, which reads them from the queue's head (below)
    /* verilator lint_off UNUSEDSIGNAL */
    wire [`F_ALU_DST_BASE_W-1:0] dst_base = insn[`F_ALU_DST_BASE_LO +: `F_ALU_DST_BASE_W];
    wire [`F_ALU_SRC_BASE_W-1:0] src_base = insn[`F_ALU_SRC_BASE_LO +: `F_ALU_SRC_BASE_W];
    wire [`F_ALU_DST_FACTOR_OUT_W-1:0] dst_fo = insn[`F_ALU_DST_FACTOR_OUT_LO +: `F_ALU_DST_FACTOR_OUT_W];
    wire [`F_ALU_DST_FACTOR_IN_W-1:0] dst_fi = insn[`F_ALU_DST_FACTOR_IN_LO +: `F_ALU_DST_FACTOR_IN_W];
    wire [`F_ALU_SRC_FACTOR_OUT_W-1:0] src_fo = insn[`F_ALU_SRC_FACTOR_OUT_LO +: `F_ALU_SRC_FACTOR_OUT_W];
    wire [`F_ALU_SRC_FACTOR_IN_W-1:0] src_fi = insn[`F_ALU_SRC_FACTOR_IN_LO +: `F_ALU_SRC_FACTOR_IN_W];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [`F_ALU_IMM_W-1:0] imm = insn[`F_ALU_IMM_LO +: `F_ALU_IMM_W];

    // ---- range check: the largest index touched, when iter_out*iter_in > 0. It depends on the
    // instruction alone: computed from the queue's head in the IDLE cycle that pops it, into a
    // register loaded at the edge at which unit_shell loads `insn` (it always holds this function
    // of `insn`), so WAIT starts from a register instead of two multiplies (timing).
    wire        no_iter = (iter_out == 14'd0) || (iter_in == 14'd0);
    function alu_range_bad_of;
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [`F_HDR_OPCODE_W-1:0] opc;
        reg   [13:0]                n_out;
        reg   [13:0]                n_in;
        reg   [27:0]                dmax;
        reg   [27:0]                smax;
        begin
            opc   = w[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W];
            n_out = w[`F_ALU_ITER_OUT_LO +: 14];
            n_in  = w[`F_ALU_ITER_IN_LO +: 14];
            dmax  = {{(28-SIB){1'b0}}, w[`F_ALU_DST_BASE_LO +: SIB]}
                  + {14'd0, n_out - 14'd1} * {{(28-SIB){1'b0}}, w[`F_ALU_DST_FACTOR_OUT_LO +: SIB]}
                  + {14'd0, n_in - 14'd1} * {{(28-SIB){1'b0}}, w[`F_ALU_DST_FACTOR_IN_LO +: SIB]};
            smax  = {{(28-SIB){1'b0}}, w[`F_ALU_SRC_BASE_LO +: SIB]}
                  + {14'd0, n_out - 14'd1} * {{(28-SIB){1'b0}}, w[`F_ALU_SRC_FACTOR_OUT_LO +: SIB]}
                  + {14'd0, n_in - 14'd1} * {{(28-SIB){1'b0}}, w[`F_ALU_SRC_FACTOR_IN_LO +: SIB]};
            alu_range_bad_of = (opc != `OP_FINISH) && (opc != `OP_BARRIER) && (opc != `OP_GEMM)
                             && (n_out != 14'd0) && (n_in != 14'd0)
                             && ((dmax >= DEPTH) || (!w[`F_ALU_USE_IMM_LO] && (smax >= DEPTH)));
        end
    endfunction
    reg alu_range_bad;
    always @(posedge clk) begin
        if (rst || clr)
            alu_range_bad <= alu_range_bad_of({`INSN_BITS{1'b0}});  // insn's reset value
        else if (q_pop)
            alu_range_bad <= alu_range_bad_of(q_dout[`INSN_BITS-1:0]);
    end
    wire gemm_range_bad;
    wire range_bad = alu_range_bad || (is_gemm && gemm_range_bad);

    // WAIT's range errors (the shell's err) and GEMM's EXEC-time faults never fall in one cycle
    wire       shell_err;
    wire       gemm_fault;
    wire [7:0] gemm_code;
    assign err      = shell_err || gemm_fault;
    assign err_code = gemm_fault ? gemm_code : `ERR_SRAM_RANGE;

    unit_shell #(.HAS_PREV(1), .HAS_NEXT(1)) u_shell (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(q_empty), .q_dout(q_dout), .q_pop(q_pop),
        .prev_avail(l2c_avail), .prev_pop(l2c_pop), .prev_full(c2l_full), .prev_push(c2l_push),
        .next_avail(s2c_avail), .next_pop(s2c_pop), .next_full(c2s_full), .next_push(c2s_push),
        .insn(insn), .start(start), .range_bad(range_bad), .exec_done(exec_done), .exec_stop(exec_stop),
        .exec_stuck((is_finish && !drained) || (is_bar && !(drained && bar_go))),
        .err(shell_err), .pc_out(pc_out), .idle(idle), .exec(exec), .stall(stall), .stuck(stuck),
        .insn_done(insn_end)
    );
    assign insn_done = insn_end;
    assign finish    = insn_end && is_finish;
    assign bar_done  = insn_end && is_bar;
    assign arrived   = exec && is_bar && drained && !halt;

    // ---- loop state: the next iteration to read
    reg [13:0]    i;
    reg [13:0]    j;
    reg [IDX-1:0] d_row;
    reg [IDX-1:0] d;
    reg [IDX-1:0] s_row;
    reg [IDX-1:0] s;
    reg           issued;   // every iteration has been read
    // ---- the iteration in EXECUTE (read in the previous free cycle)
    reg           ex_v;
    reg [IDX-1:0] ex_d;     // its dst index: where it writes
    reg           ex_fwd_d; // its dst / src index is the one written when it was read
    reg           ex_fwd_s;
    reg [VB-1:0]  fw_data;  // the vector written last (by the ALU or GEMM)
    reg           held;     // op_src holds its src operand (copy S was read by STORE since)
    reg [VB-1:0]  op_src;

    wire last_j  = (j + 14'd1 == iter_in);
    wire last_i  = (i + 14'd1 == iter_out);
    wire active  = exec && !halt && is_alu && !no_iter;
    wire go      = !acc_wr_busy && !(!use_imm && acc_src_busy);
    wire advance = active && go;
    wire rd      = advance && !issued;

    // ---- GEMM: its pipeline needs the accumulator's write port only (copy D is compute's alone)
    wire gemm_no_iter, gemm_done, gemm_we, gemm_re_dst;
    wire [IDX-1:0] gemm_waddr, gemm_raddr_dst;
    wire [VB-1:0]  gemm_wdata;
    wire gemm_active = exec && !halt && is_gemm && !gemm_no_iter;
    gemm u_gemm (
        .clk(clk), .rst(rst), .clr(clr), .insn(insn), .start(start && is_gemm), .active(gemm_active),
        .go(!acc_wr_busy), .no_iter(gemm_no_iter), .range_bad(gemm_range_bad), .done(gemm_done),
        .fault(gemm_fault), .fault_code(gemm_code), .op(gemm_op),
        .uop_re(uop_re), .uop_raddr(uop_raddr), .uop_rdata(uop_rdata), .uop_valid(uop_valid),
        .inp_re(inp_re), .inp_raddr(inp_raddr), .inp_rdata(inp_rdata),
        .wgt_re(wgt_re), .wgt_raddr(wgt_raddr), .wgt_rdata(wgt_rdata), .wgt_valid(wgt_valid),
        .acc_re(gemm_re_dst), .acc_raddr(gemm_raddr_dst), .acc_rdata(acc_rdata_dst), .fw_data(fw_data),
        .acc_we(gemm_we), .acc_waddr(gemm_waddr), .acc_wdata(gemm_wdata)
    );
    assign port_wait = (active && !go) || (gemm_active && acc_wr_busy);
    assign gemm_exec = exec && is_gemm;
    assign gemm_busy = exec && is_gemm && !halt;

    // EXEC: FINISH ends once drained; an ALU instruction with the write of its last iteration,
    // a GEMM with its last iteration's E stage (either at once without iterations); a halt
    // stops any
    wire alu_done = no_iter || (go && issued && ex_v);
    assign exec_done = !halt && (is_finish ? drained : (is_bar ? (drained && bar_go) :
                                 (is_gemm ? (gemm_no_iter || gemm_done) : alu_done)));
    assign exec_stop = halt;

    // ---- vector ALU on the read (or forwarded) operands
    wire [VB-1:0] dst_op = ex_fwd_d ? fw_data : acc_rdata_dst;
    wire [VB-1:0] src_op = ex_fwd_s ? fw_data : (held ? op_src : acc_rdata_src);
    wire [VB-1:0] result;
    alu u_alu (.op(alu_op), .use_imm(use_imm), .imm(imm), .dst(dst_op), .src(src_op), .result(result));

    wire alu_we = advance && ex_v;
    assign acc_re_dst    = rd || gemm_re_dst;
    assign acc_raddr_dst = is_gemm ? gemm_raddr_dst : d;
    assign acc_re_src    = rd && !use_imm;
    assign acc_raddr_src = s;
    assign acc_we        = alu_we || gemm_we;
    assign acc_waddr     = is_gemm ? gemm_waddr : ex_d;
    assign acc_wdata     = is_gemm ? gemm_wdata : result;

    // the vector written last, for the distance-1 read-after-write of either pipeline
    always @(posedge clk) begin
        if (acc_we)
            fw_data <= acc_wdata;
    end

    always @(posedge clk) begin
        if (rst || clr) begin
            i        <= 14'd0;
            j        <= 14'd0;
            d_row    <= {IDX{1'b0}};
            d        <= {IDX{1'b0}};
            s_row    <= {IDX{1'b0}};
            s        <= {IDX{1'b0}};
            issued   <= 1'b0;
            ex_v     <= 1'b0;
            ex_d     <= {IDX{1'b0}};
            ex_fwd_d <= 1'b0;
            ex_fwd_s <= 1'b0;
            held     <= 1'b0;
        end else if (start) begin
            i        <= 14'd0;
            j        <= 14'd0;
            d_row    <= dst_base[IDX-1:0];
            d        <= dst_base[IDX-1:0];
            s_row    <= src_base[IDX-1:0];
            s        <= src_base[IDX-1:0];
            issued   <= 1'b0;
            ex_v     <= 1'b0;
            held     <= 1'b0;
        end else if (advance) begin
            held <= 1'b0;
            ex_v <= rd;
            if (rd) begin
                ex_d     <= d;
                ex_fwd_d <= ex_v && (d == ex_d);
                ex_fwd_s <= ex_v && !use_imm && (s == ex_d);
                issued   <= last_j && last_i;
                if (last_j) begin
                    j     <= 14'd0;
                    i     <= i + 14'd1;
                    d_row <= d_row + dst_fo[IDX-1:0];
                    d     <= d_row + dst_fo[IDX-1:0];
                    s_row <= s_row + src_fo[IDX-1:0];
                    s     <= s_row + src_fo[IDX-1:0];
                end else begin
                    j <= j + 14'd1;
                    d <= d + dst_fi[IDX-1:0];
                    s <= s + src_fi[IDX-1:0];
                end
            end
        end else if (active && ex_v && !held) begin
            // frozen: keep the src operand before STORE's read replaces copy S's output
            op_src <= acc_rdata_src;
            held   <= 1'b1;
        end
    end

    // token flags (the shell's) and reserved bits
    wire unused_compute = ^{insn[`INSN_BITS-1:`ALU_USED_BITS], insn[`F_HDR_PUSH_NEXT_LO:`F_HDR_POP_PREV_LO]};
    // The ALU's arithmetic is written for these field widths: 14-bit loop counts (i, j,
    // {14'd0, iter_out - 14'd1} into the 28-bit largest index), bases and factors of SIB bits,
    // a 4-bit op, a 1-bit use_imm and a 16-bit immediate (alu.v's ports). Verilog-2005 has no
    // static assertion, so a header with other widths instantiates a module that does not
    // exist: elaboration fails (Verilator, Icarus) instead of computing garbage.
    generate
        if (`F_ALU_ITER_OUT_W != 14 || `F_ALU_ITER_IN_W != 14 || `F_ALU_DST_BASE_W != SIB ||
            `F_ALU_SRC_BASE_W != SIB || `F_ALU_DST_FACTOR_OUT_W != SIB ||
            `F_ALU_DST_FACTOR_IN_W != SIB || `F_ALU_SRC_FACTOR_OUT_W != SIB ||
            `F_ALU_SRC_FACTOR_IN_W != SIB || `F_ALU_ALU_OP_W != 4 || `F_ALU_USE_IMM_W != 1 ||
            `F_ALU_IMM_W != 16) begin : width_guard
            compute_unit_field_widths_differ_from_its_arithmetic u_width_guard ();
        end
    endgenerate
endmodule
