// core: one core of the accelerator: FETCH dispatching to the LOAD / COMPUTE / STORE queues, the
// four dependency-token queues, the accumulator buffer, GEMM's input, weight and micro-op buffers
// (written by LOAD, read by COMPUTE) with the loaded flags, and the three units. accel_top holds
// CFG_NUM_CORES of them around one CSR block, one AXI arbiter and the barrier; a core sees the
// shared DRAM port as three clients (fetch, load, store) and reports its events, errors and
// whether it can progress.
`include "accel_params.vh"

module core (
    input  wire                          clk,
    input  wire                          rst,
    input  wire                          clr,     // START or soft reset
    input  wire                          start,   // START
    input  wire                          halt,
    // this core's instruction window, the DRAM regions
    input  wire [31:0]                   insn_addr_lo,
    input  wire [31:0]                   insn_addr_hi,
    input  wire [31:0]                   insn_count,
    input  wire [`CFG_MAX_REGIONS*32-1:0] rbase,
    input  wire [`CFG_MAX_REGIONS*32-1:0] rsize,
    input  wire [`CFG_MAX_REGIONS*2-1:0]  rattr,
    // the DRAM port's three clients
    output wire                          f_req,
    output wire [31:0]                   f_addr,
    output wire [8:0]                    f_len,
    input  wire                          f_gnt,
    output wire                          l_req,
    output wire [31:0]                   l_addr,
    output wire [8:0]                    l_len,
    input  wire                          l_gnt,
    output wire                          s_req,
    output wire [31:0]                   s_addr,
    output wire [8:0]                    s_len,
    input  wire                          s_gnt,
    input  wire [`CFG_BUS_WIDTH-1:0]     rd_data,
    input  wire                          f_beat,
    input  wire                          l_beat,
    input  wire                          s_beat,
    output wire [`CFG_BUS_WIDTH-1:0]     s_wdata,
    input  wire                          f_bdone,
    input  wire                          l_bdone,
    input  wire                          s_bdone,
    input  wire                          port_busy, // a burst of this core (or an orphaned one)
    // barrier and completion
    output wire                          arrived,
    input  wire                          bar_go,
    output wire                          finish,
    // errors (valid, code, pc) and the pcs an AXI error is reported at
    output wire                          f_err,
    output wire [7:0]                    f_err_code,
    output wire [31:0]                   f_err_pc,
    output wire [31:0]                   f_burst_pc,
    output wire                          ld_err,
    output wire [7:0]                    ld_err_code,
    output wire [31:0]                   ld_pc,
    output wire                          cu_err,
    output wire [7:0]                    cu_err_code,
    output wire [31:0]                   cu_pc,
    output wire                          st_err,
    output wire [7:0]                    st_err_code,
    output wire [31:0]                   st_pc,
    // deadlock: no unit of this core and not its FETCH can progress (the port is accel_top's);
    // the smallest pc a blocked unit held the cycle before (insn_count when none: `blocked` low)
    output wire                          stuck,
    output wire                          blocked,
    output wire [31:0]                   blocked_pc,
    // events
    output wire                          ld_exec,
    output wire                          cu_exec,
    output wire                          st_exec,
    output wire                          ld_stall,
    output wire                          cu_stall,
    output wire                          st_stall,
    output wire                          cu_wait,
    output wire                          cu_gemm_exec,
    output wire                          cu_gemm_busy,
    output wire                          cu_gemm_op,
    output wire                          ld_done,
    output wire                          cu_done,
    output wire                          st_done,
    // queue fill levels for waveforms
    output wire [15:0]                   dbg_load_q,
    output wire [15:0]                   dbg_compute_q,
    output wire [15:0]                   dbg_store_q
);
    localparam QW  = `INSN_BITS + 32;  // queue entry {pc, insn}
    localparam LQA = `CFG_LOAD_QUEUE_LOG2;
    localparam CQA = `CFG_COMPUTE_QUEUE_LOG2;
    localparam SQA = `CFG_STORE_QUEUE_LOG2;

    // unit status
    wire ld_idle, ld_stuck;
    wire cu_idle, cu_stuck;
    wire st_idle, st_stuck;
    wire f_stuck, bar_done;

    // queues
    wire [QW-1:0] q_din, lq_dout, cq_dout, sq_dout;
    wire lq_push, cq_push, sq_push, lq_full, cq_full, sq_full;
    wire lq_pop, cq_pop, sq_pop, lq_empty, cq_empty, sq_empty;
    wire [LQA:0] lq_count;
    wire [CQA:0] cq_count;
    wire [SQA:0] sq_count;

    // tokens
    wire l2c_push, l2c_pop, l2c_avail, l2c_full;
    wire c2l_push, c2l_pop, c2l_avail, c2l_full;
    wire c2s_push, c2s_pop, c2s_avail, c2s_full;
    wire s2c_push, s2c_pop, s2c_avail, s2c_full;
    wire [`CFG_TOKEN_COUNT_BITS-1:0] l2c_count, c2l_count, c2s_count, s2c_count;

    // this core's share of the port is free: no request of its own, no burst of its own
    wire port_free = !port_busy && !(f_req || l_req || s_req);
    assign stuck   = ld_stuck && cu_stuck && st_stuck && f_stuck;
    // The deadlock's ERR_PC, the smallest pc a blocked unit holds, from the blocked pcs of the
    // cycle before: a deadlock is the stuck condition in two cycles in a row, in which nothing
    // changes, so they are the same pcs, and the comparators stay between registers.
    reg  [31:0] ld_bpc, cu_bpc, st_bpc;
    always @(posedge clk) begin
        ld_bpc <= (ld_stuck && !ld_idle) ? ld_pc : 32'hFFFFFFFF;
        cu_bpc <= (cu_stuck && !cu_idle) ? cu_pc : 32'hFFFFFFFF;
        st_bpc <= (st_stuck && !st_idle) ? st_pc : 32'hFFFFFFFF;
    end
    wire [31:0] min_lc  = (ld_bpc < cu_bpc) ? ld_bpc : cu_bpc;
    wire [31:0] min_all = (min_lc < st_bpc) ? min_lc : st_bpc;
    assign blocked    = (min_all != 32'hFFFFFFFF);
    assign blocked_pc = blocked ? min_all : insn_count;

    wire drained = ld_idle && lq_empty && st_idle && sq_empty && port_free;

    // ------------------------------------------------------------------ fetch and queues
    fetch u_fetch (
        .clk(clk), .rst(rst), .clr(clr), .start(start), .halt(halt),
        .insn_addr_lo(insn_addr_lo), .insn_addr_hi(insn_addr_hi), .insn_count(insn_count),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .req(f_req), .req_addr(f_addr), .req_len(f_len), .gnt(f_gnt),
        .rd_beat(f_beat), .rd_data(rd_data), .burst_done(f_bdone), .bar_done(bar_done),
        .q_din(q_din), .lq_push(lq_push), .lq_full(lq_full), .cq_push(cq_push), .cq_full(cq_full),
        .sq_push(sq_push), .sq_full(sq_full),
        .err(f_err), .err_code(f_err_code), .err_pc(f_err_pc), .burst_pc(f_burst_pc), .stuck(f_stuck)
    );

    insn_queue #(.DEPTH(`CFG_LOAD_QUEUE_DEPTH), .AW(LQA), .W(QW)) u_load_q (
        .clk(clk), .rst(rst), .clr(clr), .push(lq_push), .din(q_din), .full(lq_full),
        .pop(lq_pop), .dout(lq_dout), .empty(lq_empty), .count(lq_count));
    insn_queue #(.DEPTH(`CFG_COMPUTE_QUEUE_DEPTH), .AW(CQA), .W(QW)) u_compute_q (
        .clk(clk), .rst(rst), .clr(clr), .push(cq_push), .din(q_din), .full(cq_full),
        .pop(cq_pop), .dout(cq_dout), .empty(cq_empty), .count(cq_count));
    insn_queue #(.DEPTH(`CFG_STORE_QUEUE_DEPTH), .AW(SQA), .W(QW)) u_store_q (
        .clk(clk), .rst(rst), .clr(clr), .push(sq_push), .din(q_din), .full(sq_full),
        .pop(sq_pop), .dout(sq_dout), .empty(sq_empty), .count(sq_count));

    // ------------------------------------------------------------------ dependency tokens
    token_queue u_l2c (.clk(clk), .rst(rst), .clr(clr), .push(l2c_push), .pop(l2c_pop),
                       .avail(l2c_avail), .full(l2c_full), .count(l2c_count));
    token_queue u_c2l (.clk(clk), .rst(rst), .clr(clr), .push(c2l_push), .pop(c2l_pop),
                       .avail(c2l_avail), .full(c2l_full), .count(c2l_count));
    token_queue u_c2s (.clk(clk), .rst(rst), .clr(clr), .push(c2s_push), .pop(c2s_pop),
                       .avail(c2s_avail), .full(c2s_full), .count(c2s_count));
    token_queue u_s2c (.clk(clk), .rst(rst), .clr(clr), .push(s2c_push), .pop(s2c_pop),
                       .avail(s2c_avail), .full(s2c_full), .count(s2c_count));

    // ------------------------------------------------------------------ accumulator buffer
    wire                         ld_we, cu_we, cu_re_dst, cu_re_src, st_re, acc_wr_busy, acc_src_busy;
    wire [`CFG_ACC_IDX_BITS-1:0] ld_addr, cu_waddr, cu_raddr_dst, cu_raddr_src, st_raddr;
    wire [`CFG_ACC_VEC_BITS-1:0] ld_wdata, cu_wdata, cu_rdata_dst, acc_rdata_s;

    acc_buffer u_acc (
        .clk(clk),
        .ld_we(ld_we), .ld_addr(ld_addr), .ld_wdata(ld_wdata),
        .wr_busy(acc_wr_busy), .src_busy(acc_src_busy),
        .cu_we(cu_we), .cu_waddr(cu_waddr), .cu_wdata(cu_wdata),
        .cu_re_dst(cu_re_dst), .cu_raddr_dst(cu_raddr_dst), .cu_rdata_dst(cu_rdata_dst),
        .cu_re_src(cu_re_src), .cu_raddr_src(cu_raddr_src), .rdata_s(acc_rdata_s),
        .st_re(st_re), .st_raddr(st_raddr)
    );

    // ------------------------------------------------------------------ GEMM's buffers
    // input vectors and micro-ops: one `sram` each; weight blocks: one bank per DRAM beat
    // (wgt_buffer). Written by LOAD, read by COMPUTE's GEMM; never a port conflict.
    wire                             ld_inp_we, ld_wgt_we, ld_wgt_zero, ld_wgt_set, ld_uop_we;
    wire [`CFG_INP_IDX_BITS-1:0]     ld_inp_addr, cu_inp_raddr;
    wire [`CFG_WGT_IDX_BITS-1:0]     ld_wgt_addr, cu_wgt_raddr;
    wire [`CFG_UOP_IDX_BITS-1:0]     ld_uop_addr, cu_uop_raddr;
    wire [`CFG_INP_VEC_BITS-1:0]     ld_inp_wdata, inp_rdata;
    wire [`CFG_BUS_WIDTH-1:0]        ld_wgt_wdata;
    wire [15:0]                      ld_wgt_bank;
    wire [`CFG_UOP_BITS-1:0]         ld_uop_wdata, uop_rdata;
    wire [`CFG_WGT_BLOCK_BITS-1:0]   wgt_rdata;
    wire                             cu_inp_re, cu_wgt_re, cu_uop_re, uop_valid, wgt_valid;

    sram #(.WIDTH(`CFG_INP_VEC_BITS), .DEPTH(`CFG_INP_DEPTH), .ADDR_BITS(`CFG_INP_IDX_BITS)) u_inp (
        .clk(clk), .we(ld_inp_we), .waddr(ld_inp_addr), .wdata(ld_inp_wdata),
        .re(cu_inp_re), .raddr(cu_inp_raddr), .rdata(inp_rdata)
    );
    wgt_buffer u_wgt (
        .clk(clk), .we(ld_wgt_we), .zero(ld_wgt_zero), .bank(ld_wgt_bank), .waddr(ld_wgt_addr),
        .wdata(ld_wgt_wdata), .re(cu_wgt_re), .raddr(cu_wgt_raddr), .rdata(wgt_rdata)
    );
    sram #(.WIDTH(`CFG_UOP_BITS), .DEPTH(`CFG_UOP_DEPTH), .ADDR_BITS(`CFG_UOP_IDX_BITS)) u_uop (
        .clk(clk), .we(ld_uop_we), .waddr(ld_uop_addr), .wdata(ld_uop_wdata),
        .re(cu_uop_re), .raddr(cu_uop_raddr), .rdata(uop_rdata)
    );
    // loaded flags: cleared at START and soft reset, set by LOAD (data or padding)
    valid_bits #(.DEPTH(`CFG_UOP_DEPTH), .IDX_BITS(`CFG_UOP_IDX_BITS)) u_uop_valid (
        .clk(clk), .clr(rst || clr), .set(ld_uop_we), .set_idx(ld_uop_addr),
        .rd_idx(cu_uop_raddr), .rd_val(uop_valid)
    );
    valid_bits #(.DEPTH(`CFG_WGT_DEPTH), .IDX_BITS(`CFG_WGT_IDX_BITS)) u_wgt_valid (
        .clk(clk), .clr(rst || clr), .set(ld_wgt_set), .set_idx(ld_wgt_addr),
        .rd_idx(cu_wgt_raddr), .rd_val(wgt_valid)
    );

    // ------------------------------------------------------------------ units
    load_unit u_load (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(lq_empty), .q_dout(lq_dout), .q_pop(lq_pop),
        .c2l_avail(c2l_avail), .c2l_pop(c2l_pop), .l2c_full(l2c_full), .l2c_push(l2c_push),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .req(l_req), .req_addr(l_addr), .req_len(l_len), .gnt(l_gnt),
        .rd_beat(l_beat), .rd_data(rd_data), .burst_done(l_bdone),
        .acc_we(ld_we), .acc_addr(ld_addr), .acc_wdata(ld_wdata),
        .inp_we(ld_inp_we), .inp_addr(ld_inp_addr), .inp_wdata(ld_inp_wdata),
        .wgt_we(ld_wgt_we), .wgt_zero(ld_wgt_zero), .wgt_bank(ld_wgt_bank), .wgt_addr(ld_wgt_addr),
        .wgt_wdata(ld_wgt_wdata), .wgt_set(ld_wgt_set),
        .uop_we(ld_uop_we), .uop_addr(ld_uop_addr), .uop_wdata(ld_uop_wdata),
        .err(ld_err), .err_code(ld_err_code), .pc_out(ld_pc), .idle(ld_idle), .exec(ld_exec),
        .stall(ld_stall), .stuck(ld_stuck), .insn_done(ld_done)
    );

    compute_unit u_compute (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(cq_empty), .q_dout(cq_dout), .q_pop(cq_pop),
        .l2c_avail(l2c_avail), .l2c_pop(l2c_pop), .s2c_avail(s2c_avail), .s2c_pop(s2c_pop),
        .c2l_full(c2l_full), .c2l_push(c2l_push), .c2s_full(c2s_full), .c2s_push(c2s_push),
        .drained(drained), .arrived(arrived), .bar_go(bar_go), .bar_done(bar_done),
        .acc_wr_busy(acc_wr_busy), .acc_src_busy(acc_src_busy),
        .acc_re_dst(cu_re_dst), .acc_raddr_dst(cu_raddr_dst), .acc_rdata_dst(cu_rdata_dst),
        .acc_re_src(cu_re_src), .acc_raddr_src(cu_raddr_src), .acc_rdata_src(acc_rdata_s),
        .acc_we(cu_we), .acc_waddr(cu_waddr), .acc_wdata(cu_wdata),
        .uop_re(cu_uop_re), .uop_raddr(cu_uop_raddr), .uop_rdata(uop_rdata), .uop_valid(uop_valid),
        .inp_re(cu_inp_re), .inp_raddr(cu_inp_raddr), .inp_rdata(inp_rdata),
        .wgt_re(cu_wgt_re), .wgt_raddr(cu_wgt_raddr), .wgt_rdata(wgt_rdata), .wgt_valid(wgt_valid),
        .err(cu_err), .err_code(cu_err_code), .pc_out(cu_pc), .idle(cu_idle), .exec(cu_exec),
        .stall(cu_stall), .port_wait(cu_wait), .gemm_exec(cu_gemm_exec), .gemm_busy(cu_gemm_busy),
        .gemm_op(cu_gemm_op), .stuck(cu_stuck), .insn_done(cu_done), .finish(finish)
    );

    store_unit u_store (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(sq_empty), .q_dout(sq_dout), .q_pop(sq_pop),
        .c2s_avail(c2s_avail), .c2s_pop(c2s_pop), .s2c_full(s2c_full), .s2c_push(s2c_push),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .req(s_req), .req_addr(s_addr), .req_len(s_len), .gnt(s_gnt),
        .wr_beat(s_beat), .wr_data(s_wdata), .burst_done(s_bdone),
        .acc_re(st_re), .acc_raddr(st_raddr), .acc_rdata(acc_rdata_s),
        .err(st_err), .err_code(st_err_code), .pc_out(st_pc), .idle(st_idle), .exec(st_exec),
        .stall(st_stall), .stuck(st_stuck), .insn_done(st_done)
    );

    assign dbg_load_q    = {{(15-LQA){1'b0}}, lq_count};
    assign dbg_compute_q = {{(15-CQA){1'b0}}, cq_count};
    assign dbg_store_q   = {{(15-SQA){1'b0}}, sq_count};

    // token counts are kept for waveforms
    wire unused_core = ^{l2c_count, c2l_count, c2s_count, s2c_count};
endmodule
