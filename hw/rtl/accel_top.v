// accel_top: the accelerator. AXI4-Lite CSR slave, CFG_NUM_CORES cores (core.v: FETCH, queues,
// tokens, buffers, units), one AXI4 master shared by the cores through axi_arbiter (round robin
// between cores, FETCH > LOAD > STORE inside one), the barrier where the cores meet, error and
// deadlock handling across the cores, and the debug probes shared with the TLM's VCD (core 0's).
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
    localparam N  = `CFG_NUM_CORES;
    localparam CB = `CFG_CORE_IDX_BITS;

    // ------------------------------------------------------------------ control / CSRs
    wire [N*32-1:0] insn_addr_lo, insn_addr_hi, insn_count;
    wire [`CFG_MAX_REGIONS*32-1:0] rbase, rsize;
    wire [`CFG_MAX_REGIONS*2-1:0]  rattr;
    wire core_start, core_clr, soft_reset, halt, busy, done;
    wire [63:0] cycles;

    // per core (bit / field k: core k)
    wire [N-1:0]    ld_exec, cu_exec, st_exec, ld_stall, cu_stall, st_stall, cu_wait;
    wire [N-1:0]    cu_gemm_exec, cu_gemm_busy, cu_gemm_op, ld_done, cu_done, st_done;
    wire [N-1:0]    f_err, ld_err, cu_err, st_err, c_stuck, c_blocked, arrived, finish;
    wire [N*8-1:0]  f_err_code, ld_err_code, cu_err_code, st_err_code;
    wire [N*32-1:0] f_err_pc, f_burst_pc, ld_pc, cu_pc, st_pc, c_blocked_pc;
    wire [N*16-1:0] dbg_lq, dbg_cq, dbg_sq;

    // port
    wire [N-1:0]    f_req, l_req, s_req, f_gnt, l_gnt, s_gnt, f_beat, l_beat, s_beat;
    wire [N-1:0]    f_bdone, l_bdone, s_bdone, core_busy;
    wire [N*32-1:0] f_addr, l_addr, s_addr;
    wire [N*9-1:0]  f_len, l_len, s_len;
    wire [N*`CFG_BUS_WIDTH-1:0] s_wdata;
    wire [`CFG_BUS_WIDTH-1:0]   rd_data;
    wire resp_err, port_idle;
    wire [1:0]    err_owner;
    wire [CB-1:0] err_ocore;

    // barrier
    wire bar_go, all_finish, bar_err;
    wire [CB-1:0] bar_core;
    wire [31:0]   bar_pc;

    // deadlock: no unit of any core can progress, every FETCH finished or stalled, no DRAM traffic;
    // reported on the lowest core with a blocked unit (core 0 at its INSN_COUNT when none)
    wire stuck = (&c_stuck) && port_idle && !(|(f_req | l_req | s_req));
    reg  [CB-1:0] stuck_core;
    reg  [31:0]   stuck_pc;
    integer k;
    always @(*) begin
        stuck_core = {CB{1'b0}};
        stuck_pc   = c_blocked_pc[31:0];
        for (k = N - 1; k >= 0; k = k - 1)
            if (c_blocked[k]) begin
                stuck_core = k[CB-1:0];
                stuck_pc   = c_blocked_pc[k*32 +: 32];
            end
    end

    // AXI error: the pc of the burst's owner (in its core)
    wire [31:0] o_fpc = f_burst_pc[err_ocore*32 +: 32];
    wire [31:0] o_lpc = ld_pc[err_ocore*32 +: 32];
    wire [31:0] o_spc = st_pc[err_ocore*32 +: 32];
    wire [31:0] axi_pc = (err_owner == 2'd1) ? o_fpc : ((err_owner == 2'd2) ? o_lpc : o_spc);

    csr_block #(.N(N), .CB(CB)) u_csr (
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
        .ev_load_insn(ld_done), .ev_compute_insn(cu_done), .ev_store_insn(st_done),
        .ev_rd_beat(l_beat), .ev_wr_beat(s_beat), .ev_fetch_beat(f_beat),
        .ev_compute_wait(cu_wait), .ev_gemm_busy(cu_gemm_busy), .ev_gemm_op(cu_gemm_op),
        .finish(all_finish), .port_idle(port_idle),
        .e_fetch(f_err), .e_fetch_code(f_err_code), .e_fetch_pc(f_err_pc),
        .e_load(ld_err), .e_load_code(ld_err_code), .e_load_pc(ld_pc),
        .e_compute(cu_err), .e_compute_code(cu_err_code), .e_compute_pc(cu_pc),
        .e_store(st_err), .e_store_code(st_err_code), .e_store_pc(st_pc),
        .e_axi(resp_err), .e_axi_core(err_ocore), .e_axi_pc(axi_pc),
        .e_bar(bar_err), .e_bar_core(bar_core), .e_bar_pc(bar_pc),
        .stuck(stuck), .stuck_core(stuck_core), .stuck_pc(stuck_pc)
    );

    // ------------------------------------------------------------------ the cores
    genvar gc;
    generate
        for (gc = 0; gc < N; gc = gc + 1) begin : g_core
            core u_core (
                .clk(clk), .rst(rst), .clr(core_clr), .start(core_start), .halt(halt),
                .insn_addr_lo(insn_addr_lo[gc*32 +: 32]), .insn_addr_hi(insn_addr_hi[gc*32 +: 32]),
                .insn_count(insn_count[gc*32 +: 32]), .rbase(rbase), .rsize(rsize), .rattr(rattr),
                .f_req(f_req[gc]), .f_addr(f_addr[gc*32 +: 32]), .f_len(f_len[gc*9 +: 9]), .f_gnt(f_gnt[gc]),
                .l_req(l_req[gc]), .l_addr(l_addr[gc*32 +: 32]), .l_len(l_len[gc*9 +: 9]), .l_gnt(l_gnt[gc]),
                .s_req(s_req[gc]), .s_addr(s_addr[gc*32 +: 32]), .s_len(s_len[gc*9 +: 9]), .s_gnt(s_gnt[gc]),
                .rd_data(rd_data), .f_beat(f_beat[gc]), .l_beat(l_beat[gc]), .s_beat(s_beat[gc]),
                .s_wdata(s_wdata[gc*`CFG_BUS_WIDTH +: `CFG_BUS_WIDTH]),
                .f_bdone(f_bdone[gc]), .l_bdone(l_bdone[gc]), .s_bdone(s_bdone[gc]), .port_busy(core_busy[gc]),
                .arrived(arrived[gc]), .bar_go(bar_go), .finish(finish[gc]),
                .f_err(f_err[gc]), .f_err_code(f_err_code[gc*8 +: 8]), .f_err_pc(f_err_pc[gc*32 +: 32]),
                .f_burst_pc(f_burst_pc[gc*32 +: 32]),
                .ld_err(ld_err[gc]), .ld_err_code(ld_err_code[gc*8 +: 8]), .ld_pc(ld_pc[gc*32 +: 32]),
                .cu_err(cu_err[gc]), .cu_err_code(cu_err_code[gc*8 +: 8]), .cu_pc(cu_pc[gc*32 +: 32]),
                .st_err(st_err[gc]), .st_err_code(st_err_code[gc*8 +: 8]), .st_pc(st_pc[gc*32 +: 32]),
                .stuck(c_stuck[gc]), .blocked(c_blocked[gc]), .blocked_pc(c_blocked_pc[gc*32 +: 32]),
                .ld_exec(ld_exec[gc]), .cu_exec(cu_exec[gc]), .st_exec(st_exec[gc]),
                .ld_stall(ld_stall[gc]), .cu_stall(cu_stall[gc]), .st_stall(st_stall[gc]), .cu_wait(cu_wait[gc]),
                .cu_gemm_exec(cu_gemm_exec[gc]), .cu_gemm_busy(cu_gemm_busy[gc]), .cu_gemm_op(cu_gemm_op[gc]),
                .ld_done(ld_done[gc]), .cu_done(cu_done[gc]), .st_done(st_done[gc]),
                .dbg_load_q(dbg_lq[gc*16 +: 16]), .dbg_compute_q(dbg_cq[gc*16 +: 16]),
                .dbg_store_q(dbg_sq[gc*16 +: 16])
            );
        end
    endgenerate

    barrier #(.N(N), .CB(CB)) u_barrier (
        .clk(clk), .rst(rst), .clr(core_clr), .arrived(arrived), .finish(finish), .pc(cu_pc),
        .bar_go(bar_go), .all_finish(all_finish), .err(bar_err), .err_core(bar_core), .err_pc(bar_pc)
    );

    // ------------------------------------------------------------------ AXI4 master
    axi_arbiter #(.N(N), .CB(CB), .RIF(`CFG_DRAM_READS_IN_FLIGHT), .WIF(`CFG_DRAM_WRITES_IN_FLIGHT)) u_arb (
        .clk(clk), .rst(rst), .clr(core_clr), .halt(halt), .abort(soft_reset),
        .f_req(f_req), .f_addr(f_addr), .f_len(f_len), .f_gnt(f_gnt),
        .l_req(l_req), .l_addr(l_addr), .l_len(l_len), .l_gnt(l_gnt),
        .s_req(s_req), .s_addr(s_addr), .s_len(s_len), .s_gnt(s_gnt),
        .rd_data(rd_data), .f_beat(f_beat), .l_beat(l_beat), .s_beat(s_beat), .s_wdata(s_wdata),
        .f_done(f_bdone), .l_done(l_bdone), .s_done(s_bdone),
        .resp_err(resp_err), .err_owner(err_owner), .err_core(err_ocore),
        .idle(port_idle), .core_busy(core_busy), .dbg_rd(dbg_dma_rd), .dbg_wr(dbg_dma_wr),
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

    // ------------------------------------------------------------------ outputs (core 0's probes)
    assign irq              = done;
    assign dbg_load_busy    = ld_exec[0];
    assign dbg_compute_busy = cu_exec[0];
    assign dbg_gemm_busy    = cu_gemm_exec[0];
    assign dbg_store_busy   = st_exec[0];
    assign dbg_load_pc      = ld_pc[31:0];
    assign dbg_compute_pc   = cu_pc[31:0];
    assign dbg_store_pc     = st_pc[31:0];
    assign dbg_load_q       = dbg_lq[15:0];
    assign dbg_compute_q    = dbg_cq[15:0];
    assign dbg_store_q      = dbg_sq[15:0];
    assign dbg_cycles       = cycles;

    // busy is visible in STATUS; the other cores' probes are in the hierarchy (g_core[k].u_core)
    wire unused_top = ^{busy, dbg_lq, dbg_cq, dbg_sq, cu_gemm_exec};
endmodule
