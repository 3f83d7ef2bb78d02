// accel_top: the accelerator. AXI4-Lite CSR slave, one AXI4 master, FETCH dispatching to
// the LOAD / COMPUTE / STORE queues, the accumulator buffer, GEMM's input, weight and micro-op
// buffers (written by LOAD, read by COMPUTE) with the loaded flags of the weight and micro-op
// entries, four dependency-token queues, error and deadlock handling, and the debug probes
// shared with the TLM's VCD.
`include "accel_params.vh"

module accel_top (
    input  wire                          clk,
    input  wire                          rst,
    // AXI4-Lite slave (CSRs)
    input  wire [`CSR_ADDR_BITS-1:0]     s_axil_awaddr,
    input  wire [2:0]                    s_axil_awprot,
    input  wire                          s_axil_awvalid,
    output wire                          s_axil_awready,
    input  wire [31:0]                   s_axil_wdata,
    input  wire [3:0]                    s_axil_wstrb,
    input  wire                          s_axil_wvalid,
    output wire                          s_axil_wready,
    output wire [1:0]                    s_axil_bresp,
    output wire                          s_axil_bvalid,
    input  wire                          s_axil_bready,
    input  wire [`CSR_ADDR_BITS-1:0]     s_axil_araddr,
    input  wire [2:0]                    s_axil_arprot,
    input  wire                          s_axil_arvalid,
    output wire                          s_axil_arready,
    output wire [31:0]                   s_axil_rdata,
    output wire [1:0]                    s_axil_rresp,
    output wire                          s_axil_rvalid,
    input  wire                          s_axil_rready,
    // AXI4 master (DRAM)
    output wire [3:0]                    m_axi_awid,
    output wire [31:0]                   m_axi_awaddr,
    output wire [7:0]                    m_axi_awlen,
    output wire [2:0]                    m_axi_awsize,
    output wire [1:0]                    m_axi_awburst,
    output wire                          m_axi_awlock,
    output wire [3:0]                    m_axi_awcache,
    output wire [2:0]                    m_axi_awprot,
    output wire                          m_axi_awvalid,
    input  wire                          m_axi_awready,
    output wire [`CFG_BUS_WIDTH-1:0]     m_axi_wdata,
    output wire [`CFG_BUS_BYTES-1:0]     m_axi_wstrb,
    output wire                          m_axi_wlast,
    output wire                          m_axi_wvalid,
    input  wire                          m_axi_wready,
    input  wire [3:0]                    m_axi_bid,
    input  wire [1:0]                    m_axi_bresp,
    input  wire                          m_axi_bvalid,
    output wire                          m_axi_bready,
    output wire [3:0]                    m_axi_arid,
    output wire [31:0]                   m_axi_araddr,
    output wire [7:0]                    m_axi_arlen,
    output wire [2:0]                    m_axi_arsize,
    output wire [1:0]                    m_axi_arburst,
    output wire                          m_axi_arlock,
    output wire [3:0]                    m_axi_arcache,
    output wire [2:0]                    m_axi_arprot,
    output wire                          m_axi_arvalid,
    input  wire                          m_axi_arready,
    input  wire [3:0]                    m_axi_rid,
    input  wire [`CFG_BUS_WIDTH-1:0]     m_axi_rdata,
    input  wire [1:0]                    m_axi_rresp,
    input  wire                          m_axi_rlast,
    input  wire                          m_axi_rvalid,
    output wire                          m_axi_rready,
    // interrupt: STATUS.done (also set on error)
    output wire                          irq,
    // debug probes (same names as the TLM's VCD)
    output wire                          dbg_load_busy,
    output wire                          dbg_compute_busy,
    output wire                          dbg_gemm_busy,
    output wire                          dbg_store_busy,
    output wire [31:0]                   dbg_load_pc,
    output wire [31:0]                   dbg_compute_pc,
    output wire [31:0]                   dbg_store_pc,
    output wire [15:0]                   dbg_load_q,
    output wire [15:0]                   dbg_compute_q,
    output wire [15:0]                   dbg_store_q,
    output wire                          dbg_dma_rd,
    output wire                          dbg_dma_wr,
    output wire [63:0]                   dbg_cycles
);
    localparam QW  = `INSN_BITS + 32;  // queue entry {pc, insn}
    localparam LQA = `CFG_LOAD_QUEUE_LOG2;
    localparam CQA = `CFG_COMPUTE_QUEUE_LOG2;
    localparam SQA = `CFG_STORE_QUEUE_LOG2;

    // ------------------------------------------------------------------ control / CSRs
    wire [31:0] insn_addr_lo, insn_addr_hi, insn_count;
    wire [`CFG_MAX_REGIONS*32-1:0] rbase, rsize;
    wire [`CFG_MAX_REGIONS*2-1:0]  rattr;
    wire core_start, core_clr, soft_reset, halt, busy, done;
    wire [63:0] cycles;

    // unit status
    wire ld_idle, ld_exec, ld_stall, ld_stuck, ld_done, ld_err;
    wire cu_idle, cu_exec, cu_stall, cu_wait, cu_stuck, cu_done, cu_err, cu_finish;
    wire cu_gemm_exec, cu_gemm_busy, cu_gemm_op;
    wire st_idle, st_exec, st_stall, st_stuck, st_done, st_err;
    wire [7:0]  ld_err_code, cu_err_code, st_err_code, f_err_code;
    wire [31:0] ld_pc, cu_pc, st_pc, f_err_pc, f_burst_pc;
    wire        f_err, f_stuck;

    // port
    wire f_req, l_req, s_req, f_gnt, l_gnt, s_gnt;
    wire [31:0] f_addr, l_addr, s_addr;
    wire [8:0]  f_len, l_len, s_len;
    wire [`CFG_BUS_WIDTH-1:0] rd_data, s_wdata;
    wire f_beat, l_beat, s_beat, f_bdone, l_bdone, s_bdone;
    wire resp_err, port_idle;
    wire [1:0] err_owner;

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

    // deadlock: no unit can progress, fetch finished or stalled, no DRAM traffic
    wire any_req  = f_req || l_req || s_req;
    wire port_free = port_idle && !any_req;
    wire stuck    = ld_stuck && cu_stuck && st_stuck && f_stuck && port_free;
    // The deadlock's ERR_PC, the smallest pc a blocked unit holds, from the blocked pcs of the
    // cycle before: a deadlock is the stuck condition in two cycles in a row, in which nothing
    // changes, so they are the same pcs, and the comparators stay between registers.
    reg  [31:0] ld_bpc, cu_bpc, st_bpc;
    always @(posedge clk) begin
        ld_bpc <= (ld_stuck && !ld_idle) ? ld_pc : 32'hFFFFFFFF;
        cu_bpc <= (cu_stuck && !cu_idle) ? cu_pc : 32'hFFFFFFFF;
        st_bpc <= (st_stuck && !st_idle) ? st_pc : 32'hFFFFFFFF;
    end
    wire [31:0] min_lc = (ld_bpc < cu_bpc) ? ld_bpc : cu_bpc;
    wire [31:0] min_all = (min_lc < st_bpc) ? min_lc : st_bpc;
    wire [31:0] stuck_pc = (min_all == 32'hFFFFFFFF) ? insn_count : min_all;

    wire drained = ld_idle && lq_empty && st_idle && sq_empty && port_free;

    // AXI error: the pc of the burst's owner
    wire [31:0] axi_pc = (err_owner == 2'd1) ? f_burst_pc : ((err_owner == 2'd2) ? ld_pc : st_pc);

    csr_block u_csr (
        .clk(clk), .rst(rst),
        .s_axil_awaddr(s_axil_awaddr), .s_axil_awprot(s_axil_awprot), .s_axil_awvalid(s_axil_awvalid),
        .s_axil_awready(s_axil_awready), .s_axil_wdata(s_axil_wdata), .s_axil_wstrb(s_axil_wstrb),
        .s_axil_wvalid(s_axil_wvalid), .s_axil_wready(s_axil_wready), .s_axil_bresp(s_axil_bresp),
        .s_axil_bvalid(s_axil_bvalid), .s_axil_bready(s_axil_bready), .s_axil_araddr(s_axil_araddr),
        .s_axil_arprot(s_axil_arprot), .s_axil_arvalid(s_axil_arvalid), .s_axil_arready(s_axil_arready),
        .s_axil_rdata(s_axil_rdata), .s_axil_rresp(s_axil_rresp), .s_axil_rvalid(s_axil_rvalid),
        .s_axil_rready(s_axil_rready),
        .insn_addr_lo(insn_addr_lo), .insn_addr_hi(insn_addr_hi), .insn_count(insn_count),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .core_start(core_start), .core_clr(core_clr), .soft_reset(soft_reset), .halt(halt),
        .busy(busy), .done(done), .cycles(cycles),
        .ev_load_busy(ld_exec), .ev_compute_busy(cu_exec), .ev_store_busy(st_exec),
        .ev_load_stall(ld_stall), .ev_compute_stall(cu_stall), .ev_store_stall(st_stall),
        .ev_compute_wait(cu_wait), .ev_gemm_busy(cu_gemm_busy), .ev_gemm_op(cu_gemm_op),
        .ev_load_insn(ld_done), .ev_compute_insn(cu_done), .ev_store_insn(st_done),
        .ev_rd_beat(l_beat), .ev_wr_beat(s_beat), .ev_fetch_beat(f_beat),
        .finish(cu_finish), .port_idle(port_idle),
        .e_fetch(f_err), .e_fetch_code(f_err_code), .e_fetch_pc(f_err_pc),
        .e_load(ld_err), .e_load_code(ld_err_code), .e_load_pc(ld_pc),
        .e_compute(cu_err), .e_compute_code(cu_err_code), .e_compute_pc(cu_pc),
        .e_store(st_err), .e_store_code(st_err_code), .e_store_pc(st_pc),
        .e_axi(resp_err), .e_axi_pc(axi_pc),
        .stuck(stuck), .stuck_pc(stuck_pc)
    );

    // ------------------------------------------------------------------ fetch and queues
    fetch u_fetch (
        .clk(clk), .rst(rst), .clr(core_clr), .start(core_start), .halt(halt),
        .insn_addr_lo(insn_addr_lo), .insn_addr_hi(insn_addr_hi), .insn_count(insn_count),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .req(f_req), .req_addr(f_addr), .req_len(f_len), .gnt(f_gnt),
        .rd_beat(f_beat), .rd_data(rd_data), .burst_done(f_bdone),
        .q_din(q_din), .lq_push(lq_push), .lq_full(lq_full), .cq_push(cq_push), .cq_full(cq_full),
        .sq_push(sq_push), .sq_full(sq_full),
        .err(f_err), .err_code(f_err_code), .err_pc(f_err_pc), .burst_pc(f_burst_pc), .stuck(f_stuck)
    );

    insn_queue #(.DEPTH(`CFG_LOAD_QUEUE_DEPTH), .AW(LQA), .W(QW)) u_load_q (
        .clk(clk), .rst(rst), .clr(core_clr), .push(lq_push), .din(q_din), .full(lq_full),
        .pop(lq_pop), .dout(lq_dout), .empty(lq_empty), .count(lq_count));
    insn_queue #(.DEPTH(`CFG_COMPUTE_QUEUE_DEPTH), .AW(CQA), .W(QW)) u_compute_q (
        .clk(clk), .rst(rst), .clr(core_clr), .push(cq_push), .din(q_din), .full(cq_full),
        .pop(cq_pop), .dout(cq_dout), .empty(cq_empty), .count(cq_count));
    insn_queue #(.DEPTH(`CFG_STORE_QUEUE_DEPTH), .AW(SQA), .W(QW)) u_store_q (
        .clk(clk), .rst(rst), .clr(core_clr), .push(sq_push), .din(q_din), .full(sq_full),
        .pop(sq_pop), .dout(sq_dout), .empty(sq_empty), .count(sq_count));

    // ------------------------------------------------------------------ dependency tokens
    token_queue u_l2c (.clk(clk), .rst(rst), .clr(core_clr), .push(l2c_push), .pop(l2c_pop),
                       .avail(l2c_avail), .full(l2c_full), .count(l2c_count));
    token_queue u_c2l (.clk(clk), .rst(rst), .clr(core_clr), .push(c2l_push), .pop(c2l_pop),
                       .avail(c2l_avail), .full(c2l_full), .count(c2l_count));
    token_queue u_c2s (.clk(clk), .rst(rst), .clr(core_clr), .push(c2s_push), .pop(c2s_pop),
                       .avail(c2s_avail), .full(c2s_full), .count(c2s_count));
    token_queue u_s2c (.clk(clk), .rst(rst), .clr(core_clr), .push(s2c_push), .pop(s2c_pop),
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
        .clk(clk), .clr(rst || core_clr), .set(ld_uop_we), .set_idx(ld_uop_addr),
        .rd_idx(cu_uop_raddr), .rd_val(uop_valid)
    );
    valid_bits #(.DEPTH(`CFG_WGT_DEPTH), .IDX_BITS(`CFG_WGT_IDX_BITS)) u_wgt_valid (
        .clk(clk), .clr(rst || core_clr), .set(ld_wgt_set), .set_idx(ld_wgt_addr),
        .rd_idx(cu_wgt_raddr), .rd_val(wgt_valid)
    );

    // ------------------------------------------------------------------ units
    load_unit u_load (
        .clk(clk), .rst(rst), .clr(core_clr), .halt(halt),
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
        .clk(clk), .rst(rst), .clr(core_clr), .halt(halt),
        .q_empty(cq_empty), .q_dout(cq_dout), .q_pop(cq_pop),
        .l2c_avail(l2c_avail), .l2c_pop(l2c_pop), .s2c_avail(s2c_avail), .s2c_pop(s2c_pop),
        .c2l_full(c2l_full), .c2l_push(c2l_push), .c2s_full(c2s_full), .c2s_push(c2s_push),
        .drained(drained),
        .acc_wr_busy(acc_wr_busy), .acc_src_busy(acc_src_busy),
        .acc_re_dst(cu_re_dst), .acc_raddr_dst(cu_raddr_dst), .acc_rdata_dst(cu_rdata_dst),
        .acc_re_src(cu_re_src), .acc_raddr_src(cu_raddr_src), .acc_rdata_src(acc_rdata_s),
        .acc_we(cu_we), .acc_waddr(cu_waddr), .acc_wdata(cu_wdata),
        .uop_re(cu_uop_re), .uop_raddr(cu_uop_raddr), .uop_rdata(uop_rdata), .uop_valid(uop_valid),
        .inp_re(cu_inp_re), .inp_raddr(cu_inp_raddr), .inp_rdata(inp_rdata),
        .wgt_re(cu_wgt_re), .wgt_raddr(cu_wgt_raddr), .wgt_rdata(wgt_rdata), .wgt_valid(wgt_valid),
        .err(cu_err), .err_code(cu_err_code), .pc_out(cu_pc), .idle(cu_idle), .exec(cu_exec),
        .stall(cu_stall), .port_wait(cu_wait), .gemm_exec(cu_gemm_exec), .gemm_busy(cu_gemm_busy),
        .gemm_op(cu_gemm_op), .stuck(cu_stuck), .insn_done(cu_done), .finish(cu_finish)
    );

    store_unit u_store (
        .clk(clk), .rst(rst), .clr(core_clr), .halt(halt),
        .q_empty(sq_empty), .q_dout(sq_dout), .q_pop(sq_pop),
        .c2s_avail(c2s_avail), .c2s_pop(c2s_pop), .s2c_full(s2c_full), .s2c_push(s2c_push),
        .rbase(rbase), .rsize(rsize), .rattr(rattr),
        .req(s_req), .req_addr(s_addr), .req_len(s_len), .gnt(s_gnt),
        .wr_beat(s_beat), .wr_data(s_wdata), .burst_done(s_bdone),
        .acc_re(st_re), .acc_raddr(st_raddr), .acc_rdata(acc_rdata_s),
        .err(st_err), .err_code(st_err_code), .pc_out(st_pc), .idle(st_idle), .exec(st_exec),
        .stall(st_stall), .stuck(st_stuck), .insn_done(st_done)
    );

    // ------------------------------------------------------------------ AXI4 master
    axi_arbiter u_arb (
        .clk(clk), .rst(rst), .halt(halt), .abort(soft_reset),
        .f_req(f_req), .f_addr(f_addr), .f_len(f_len), .f_gnt(f_gnt),
        .l_req(l_req), .l_addr(l_addr), .l_len(l_len), .l_gnt(l_gnt),
        .s_req(s_req), .s_addr(s_addr), .s_len(s_len), .s_gnt(s_gnt),
        .rd_data(rd_data), .f_beat(f_beat), .l_beat(l_beat), .s_beat(s_beat), .s_wdata(s_wdata),
        .f_done(f_bdone), .l_done(l_bdone), .s_done(s_bdone),
        .resp_err(resp_err), .err_owner(err_owner),
        .idle(port_idle), .dbg_rd(dbg_dma_rd), .dbg_wr(dbg_dma_wr),
        .m_axi_awid(m_axi_awid), .m_axi_awaddr(m_axi_awaddr), .m_axi_awlen(m_axi_awlen),
        .m_axi_awsize(m_axi_awsize), .m_axi_awburst(m_axi_awburst), .m_axi_awlock(m_axi_awlock),
        .m_axi_awcache(m_axi_awcache), .m_axi_awprot(m_axi_awprot), .m_axi_awvalid(m_axi_awvalid),
        .m_axi_awready(m_axi_awready), .m_axi_wdata(m_axi_wdata), .m_axi_wstrb(m_axi_wstrb),
        .m_axi_wlast(m_axi_wlast), .m_axi_wvalid(m_axi_wvalid), .m_axi_wready(m_axi_wready),
        .m_axi_bid(m_axi_bid), .m_axi_bresp(m_axi_bresp), .m_axi_bvalid(m_axi_bvalid),
        .m_axi_bready(m_axi_bready), .m_axi_arid(m_axi_arid), .m_axi_araddr(m_axi_araddr),
        .m_axi_arlen(m_axi_arlen), .m_axi_arsize(m_axi_arsize), .m_axi_arburst(m_axi_arburst),
        .m_axi_arlock(m_axi_arlock), .m_axi_arcache(m_axi_arcache), .m_axi_arprot(m_axi_arprot),
        .m_axi_arvalid(m_axi_arvalid), .m_axi_arready(m_axi_arready), .m_axi_rid(m_axi_rid),
        .m_axi_rdata(m_axi_rdata), .m_axi_rresp(m_axi_rresp), .m_axi_rlast(m_axi_rlast),
        .m_axi_rvalid(m_axi_rvalid), .m_axi_rready(m_axi_rready)
    );

    // ------------------------------------------------------------------ outputs
    assign irq              = done;
    assign dbg_load_busy    = ld_exec;
    assign dbg_compute_busy = cu_exec;
    assign dbg_gemm_busy    = cu_gemm_exec;
    assign dbg_store_busy   = st_exec;
    assign dbg_load_pc      = ld_pc;
    assign dbg_compute_pc   = cu_pc;
    assign dbg_store_pc     = st_pc;
    assign dbg_load_q       = {{(15-LQA){1'b0}}, lq_count};
    assign dbg_compute_q    = {{(15-CQA){1'b0}}, cq_count};
    assign dbg_store_q      = {{(15-SQA){1'b0}}, sq_count};
    assign dbg_cycles       = cycles;

    // token counts are kept for waveforms; busy is visible in STATUS
    wire unused_top = ^{l2c_count, c2l_count, c2s_count, s2c_count, busy, cu_idle};
endmodule
