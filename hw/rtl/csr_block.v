// csr_block: the AXI4-Lite slave with the register map of hw/csr.py, plus run control:
// START / SOFT_RESET, STATUS (busy, done, error, code), ERR_PC, the CYCLES and per-unit
// counters, error arbitration (the first fault wins; lowest pc if several in one cycle) and
// deadlock detection (the `stuck` condition for 2 consecutive cycles).
//
// A write is applied in the cycle after both its AW and W beats have been accepted (B follows
// the next cycle); a read answers (R valid) the cycle after its AR handshake. START is
// honoured only while not busy: in its apply cycle s the core is cleared and at the edge
// busy rises; CYCLES counts the busy cycles s+1 .. d, d being the cycle at whose end DONE rises.
`include "accel_params.vh"

module csr_block (
    input  wire                            clk,
    input  wire                            rst,
    // AXI4-Lite slave
    input  wire [`CSR_ADDR_BITS-1:0]       s_axil_awaddr,
    input  wire [2:0]                      s_axil_awprot,
    input  wire                            s_axil_awvalid,
    output wire                            s_axil_awready,
    input  wire [31:0]                     s_axil_wdata,
    input  wire [3:0]                      s_axil_wstrb,
    input  wire                            s_axil_wvalid,
    output wire                            s_axil_wready,
    output wire [1:0]                      s_axil_bresp,
    output reg                             s_axil_bvalid,
    input  wire                            s_axil_bready,
    input  wire [`CSR_ADDR_BITS-1:0]       s_axil_araddr,
    input  wire [2:0]                      s_axil_arprot,
    input  wire                            s_axil_arvalid,
    output wire                            s_axil_arready,
    output reg  [31:0]                     s_axil_rdata,
    output wire [1:0]                      s_axil_rresp,
    output reg                             s_axil_rvalid,
    input  wire                            s_axil_rready,
    // configuration to the core
    output reg  [31:0]                     insn_addr_lo,
    output reg  [31:0]                     insn_addr_hi,
    output reg  [31:0]                     insn_count,
    output wire [`CFG_MAX_REGIONS*32-1:0]  rbase,
    output wire [`CFG_MAX_REGIONS*32-1:0]  rsize,
    output wire [`CFG_MAX_REGIONS*2-1:0]   rattr,
    // run control
    output wire                            core_start,  // pulse: START accepted
    output wire                            core_clr,    // pulse: START or SOFT_RESET
    output wire                            soft_reset,  // pulse: SOFT_RESET
    output wire                            halt,        // units must not start anything
    output reg                             busy,
    output reg                             done,
    output reg  [63:0]                     cycles,
    // events, counted while busy
    input  wire                            ev_load_busy,
    input  wire                            ev_compute_busy,
    input  wire                            ev_store_busy,
    input  wire                            ev_load_stall,
    input  wire                            ev_compute_stall,
    input  wire                            ev_compute_wait, // the ALU or GEMM frozen on a buffer port
    input  wire                            ev_gemm_busy,    // EXEC of a GEMM (up to an error cycle)
    input  wire                            ev_gemm_op,      // a GEMM block multiplied and written
    input  wire                            ev_store_stall,
    input  wire                            ev_load_insn,
    input  wire                            ev_compute_insn,
    input  wire                            ev_store_insn,
    input  wire                            ev_rd_beat,     // LOAD read beat
    input  wire                            ev_wr_beat,     // STORE write beat
    input  wire                            ev_fetch_beat,  // FETCH read beat
    // completion
    input  wire                            finish,     // FINISH completed
    input  wire                            port_idle,  // no burst on the AXI port
    // error sources (valid, code, pc)
    input  wire                            e_fetch,
    input  wire [7:0]                      e_fetch_code,
    input  wire [31:0]                     e_fetch_pc,
    input  wire                            e_load,
    input  wire [7:0]                      e_load_code,
    input  wire [31:0]                     e_load_pc,
    input  wire                            e_compute,
    input  wire [7:0]                      e_compute_code,
    input  wire [31:0]                     e_compute_pc,
    input  wire                            e_store,
    input  wire [7:0]                      e_store_code,
    input  wire [31:0]                     e_store_pc,
    input  wire                            e_axi,
    input  wire [31:0]                     e_axi_pc,
    input  wire                            stuck,      // deadlock condition this cycle
    input  wire [31:0]                     stuck_pc
);
    localparam [31:0] BUS_BYTES = `CFG_BUS_BYTES;
    localparam [3:0]  RBASE_OFF = 4'h0, RSIZE_OFF = 4'h4, RATTR_OFF = 4'h8;

    // ------------------------------------------------------------------ registers
    reg        error;
    reg [7:0]  err_code;
    reg [31:0] err_pc;
    reg        stuck_prev;
    reg [31:0] c_load_busy, c_compute_busy, c_store_busy;
    reg [31:0] c_load_stall, c_compute_stall, c_store_stall;
    reg [31:0] c_load_insns, c_compute_insns, c_store_insns;
    reg [31:0] c_rd_bytes, c_wr_bytes, c_fetch_bytes;
    reg [31:0] c_compute_wait;
    reg [31:0] c_gemm_busy, c_gemm_ops;

    // ------------------------------------------------------------------ AXI4-Lite write
    reg                       aw_held;
    reg [`CSR_ADDR_BITS-1:0]  aw_addr;
    reg                       w_held;
    reg [31:0]                w_data;
    reg [3:0]                 w_strb;

    assign s_axil_awready = !aw_held;
    assign s_axil_wready  = !w_held;
    assign s_axil_bresp   = 2'b00;

    wire wr_apply = aw_held && w_held && !s_axil_bvalid;

    // byte-lane merge of a write into a register
    function [31:0] wmerge;
        input [31:0] old;
        input [31:0] nw;
        input [3:0]  strb;
        begin
            wmerge = {strb[3] ? nw[31:24] : old[31:24], strb[2] ? nw[23:16] : old[23:16],
                      strb[1] ? nw[15:8]  : old[15:8],  strb[0] ? nw[7:0]   : old[7:0]};
        end
    endfunction

    wire [31:0] wval = w_data;
    wire        wr_is_region = (aw_addr[11:8] == 4'h1) && ({1'b0, aw_addr[7:4]} < `CFG_MAX_REGIONS);
    wire [`CFG_REGION_IDX_BITS-1:0] wr_ridx = aw_addr[4 +: `CFG_REGION_IDX_BITS];
    wire wr_ctrl = wr_apply && (aw_addr == `CSR_CTRL) && w_strb[0];

    assign soft_reset = wr_ctrl && wval[`CTRL_SOFT_RESET_BIT];
    assign core_start = wr_ctrl && wval[`CTRL_START_BIT] && !soft_reset && !busy;
    assign core_clr   = soft_reset || core_start;
    assign halt       = !busy || error;

    // The region registers: plain registers per region (written when the write selects
    // it), read through an explicit multiplexer below; not memory arrays, since hw/rtl
    // reads no memory array combinationally (docs/synthesis.md) and every region is
    // wired to the checkers at once anyway.
    genvar gi;
    generate
        for (gi = 0; gi < `CFG_MAX_REGIONS; gi = gi + 1) begin : g_region
            localparam [`CFG_REGION_IDX_BITS-1:0] IDX = gi;
            reg [31:0] base;
            reg [31:0] size;
            reg [1:0]  attr;
            wire hit = wr_apply && wr_is_region && (wr_ridx == IDX);
            always @(posedge clk) begin
                if (rst) begin
                    base <= 32'd0;
                    size <= 32'd0;
                    attr <= 2'd0;
                end else if (hit) begin
                    if (aw_addr[3:0] == RBASE_OFF) base <= wmerge(base, wval, w_strb);
                    if (aw_addr[3:0] == RSIZE_OFF) size <= wmerge(size, wval, w_strb);
                    if ((aw_addr[3:0] == RATTR_OFF) && w_strb[0]) attr <= wval[1:0];
                end
            end
            assign rbase[gi*32 +: 32] = base;
            assign rsize[gi*32 +: 32] = size;
            assign rattr[gi*2 +: 2]   = attr;
        end
    endgenerate

    always @(posedge clk) begin
        if (rst) begin
            aw_held       <= 1'b0;
            aw_addr       <= {`CSR_ADDR_BITS{1'b0}};
            w_held        <= 1'b0;
            w_data        <= 32'd0;
            w_strb        <= 4'd0;
            s_axil_bvalid <= 1'b0;
            insn_addr_lo  <= 32'd0;
            insn_addr_hi  <= 32'd0;
            insn_count    <= 32'd0;
        end else begin
            if (s_axil_awvalid && s_axil_awready) begin
                aw_held <= 1'b1;
                aw_addr <= s_axil_awaddr;
            end
            if (s_axil_wvalid && s_axil_wready) begin
                w_held <= 1'b1;
                w_data <= s_axil_wdata;
                w_strb <= s_axil_wstrb;
            end
            if (s_axil_bvalid && s_axil_bready)
                s_axil_bvalid <= 1'b0;
            if (wr_apply) begin
                aw_held       <= 1'b0;
                w_held        <= 1'b0;
                s_axil_bvalid <= 1'b1;
                if (aw_addr == `CSR_INSN_ADDR_LO) insn_addr_lo <= wmerge(insn_addr_lo, wval, w_strb);
                if (aw_addr == `CSR_INSN_ADDR_HI) insn_addr_hi <= wmerge(insn_addr_hi, wval, w_strb);
                if (aw_addr == `CSR_INSN_COUNT)   insn_count   <= wmerge(insn_count, wval, w_strb);
            end
        end
    end

    // ------------------------------------------------------------------ error arbitration
    // The error is raised (and everything halts) at the end of the cycle e in which any source
    // faults; which fault wins (the lowest pc) only decides ERR_PC and the code, so the sources
    // of cycle e are registered and the winner is picked in e+1, off the path that raises it
    // (visible with DONE, which rises at the end of e+1 at the earliest).
    wire deadlock = stuck && stuck_prev;
    wire raise    = e_fetch || e_load || e_compute || e_store || e_axi || deadlock;
    reg        r_fetch, r_load, r_compute, r_store, r_axi, r_dead;
    reg [7:0]  r_fetch_code, r_load_code, r_compute_code, r_store_code;
    reg [31:0] r_fetch_pc, r_load_pc, r_compute_pc, r_store_pc, r_axi_pc, r_dead_pc;
    reg        pick;      // the cycle after the first error: latch the winner

    always @(posedge clk) begin
        r_fetch   <= e_fetch;   r_fetch_code   <= e_fetch_code;   r_fetch_pc   <= e_fetch_pc;
        r_load    <= e_load;    r_load_code    <= e_load_code;    r_load_pc    <= e_load_pc;
        r_compute <= e_compute; r_compute_code <= e_compute_code; r_compute_pc <= e_compute_pc;
        r_store   <= e_store;   r_store_code   <= e_store_code;   r_store_pc   <= e_store_pc;
        r_axi     <= e_axi;     r_axi_pc       <= e_axi_pc;
        r_dead    <= deadlock;  r_dead_pc      <= stuck_pc;
    end

    reg        any_err;
    reg [7:0]  sel_code;
    reg [31:0] sel_pc;

    always @(*) begin
        any_err  = 1'b0;
        sel_code = `ERR_NONE;
        sel_pc   = 32'd0;
        if (r_fetch) begin
            any_err = 1'b1; sel_code = r_fetch_code; sel_pc = r_fetch_pc;
        end
        if (r_load && (!any_err || r_load_pc < sel_pc)) begin
            any_err = 1'b1; sel_code = r_load_code; sel_pc = r_load_pc;
        end
        if (r_compute && (!any_err || r_compute_pc < sel_pc)) begin
            any_err = 1'b1; sel_code = r_compute_code; sel_pc = r_compute_pc;
        end
        if (r_store && (!any_err || r_store_pc < sel_pc)) begin
            any_err = 1'b1; sel_code = r_store_code; sel_pc = r_store_pc;
        end
        if (r_axi && (!any_err || r_axi_pc < sel_pc)) begin
            any_err = 1'b1; sel_code = `ERR_AXI_RESP; sel_pc = r_axi_pc;
        end
        if (r_dead && !any_err) begin
            sel_code = `ERR_DEADLOCK; sel_pc = r_dead_pc;
        end
    end

    // ------------------------------------------------------------------ run control, counters
    always @(posedge clk) begin
        if (rst || soft_reset) begin
            busy       <= 1'b0;
            done       <= 1'b0;
            error      <= 1'b0;
            err_code   <= `ERR_NONE;
            err_pc     <= 32'd0;
            stuck_prev <= 1'b0;
            pick       <= 1'b0;
        end else if (core_start) begin
            busy       <= 1'b1;
            done       <= 1'b0;
            error      <= 1'b0;
            err_code   <= `ERR_NONE;
            err_pc     <= 32'd0;
            stuck_prev <= 1'b0;
            pick       <= 1'b0;
        end else if (busy) begin
            stuck_prev <= stuck && !error;
            pick       <= !error && raise;
            if (pick) begin
                err_code <= sel_code;
                err_pc   <= sel_pc;
            end
            if (!error && raise) begin
                error    <= 1'b1;
            end else if (error && port_idle) begin
                busy <= 1'b0;
                done <= 1'b1;
            end else if (!error && finish) begin
                busy <= 1'b0;
                done <= 1'b1;
            end
        end
    end

    always @(posedge clk) begin
        if (rst || core_clr) begin
            cycles          <= 64'd0;
            c_load_busy     <= 32'd0;
            c_compute_busy  <= 32'd0;
            c_store_busy    <= 32'd0;
            c_load_stall    <= 32'd0;
            c_compute_stall <= 32'd0;
            c_store_stall   <= 32'd0;
            c_load_insns    <= 32'd0;
            c_compute_insns <= 32'd0;
            c_store_insns   <= 32'd0;
            c_rd_bytes      <= 32'd0;
            c_wr_bytes      <= 32'd0;
            c_fetch_bytes   <= 32'd0;
            c_compute_wait  <= 32'd0;
            c_gemm_busy     <= 32'd0;
            c_gemm_ops      <= 32'd0;
        end else if (busy) begin
            cycles <= cycles + 64'd1;
            if (ev_load_busy)     c_load_busy     <= c_load_busy + 32'd1;
            if (ev_compute_busy)  c_compute_busy  <= c_compute_busy + 32'd1;
            if (ev_store_busy)    c_store_busy    <= c_store_busy + 32'd1;
            if (ev_load_stall)    c_load_stall    <= c_load_stall + 32'd1;
            if (ev_compute_stall) c_compute_stall <= c_compute_stall + 32'd1;
            if (ev_store_stall)   c_store_stall   <= c_store_stall + 32'd1;
            if (ev_load_insn)     c_load_insns    <= c_load_insns + 32'd1;
            if (ev_compute_insn)  c_compute_insns <= c_compute_insns + 32'd1;
            if (ev_store_insn)    c_store_insns   <= c_store_insns + 32'd1;
            if (ev_rd_beat)       c_rd_bytes      <= c_rd_bytes + BUS_BYTES;
            if (ev_wr_beat)       c_wr_bytes      <= c_wr_bytes + BUS_BYTES;
            if (ev_fetch_beat)    c_fetch_bytes   <= c_fetch_bytes + BUS_BYTES;
            if (ev_compute_wait)  c_compute_wait  <= c_compute_wait + 32'd1;
            if (ev_gemm_busy)     c_gemm_busy     <= c_gemm_busy + 32'd1;
            if (ev_gemm_op)       c_gemm_ops      <= c_gemm_ops + 32'd1;
        end
    end

    // ------------------------------------------------------------------ AXI4-Lite read
    assign s_axil_arready = !s_axil_rvalid;
    assign s_axil_rresp   = 2'b00;

    wire rd_is_region = (s_axil_araddr[11:8] == 4'h1) && ({1'b0, s_axil_araddr[7:4]} < `CFG_MAX_REGIONS);
    wire [`CFG_REGION_IDX_BITS-1:0] rd_ridx = s_axil_araddr[4 +: `CFG_REGION_IDX_BITS];
    reg [31:0] rd_base, rd_size;
    reg [1:0]  rd_attr;
    reg [31:0] rd_val;
    integer k;

    always @(*) begin  // region rd_ridx's registers
        rd_base = rbase[0 +: 32];
        rd_size = rsize[0 +: 32];
        rd_attr = rattr[0 +: 2];
        for (k = 1; k < `CFG_MAX_REGIONS; k = k + 1)
            if (rd_ridx == k[`CFG_REGION_IDX_BITS-1:0]) begin
                rd_base = rbase[k*32 +: 32];
                rd_size = rsize[k*32 +: 32];
                rd_attr = rattr[k*2 +: 2];
            end
    end

    always @(*) begin
        rd_val = 32'd0;
        if (rd_is_region) begin
            if (s_axil_araddr[3:0] == RBASE_OFF) rd_val = rd_base;
            if (s_axil_araddr[3:0] == RSIZE_OFF) rd_val = rd_size;
            if (s_axil_araddr[3:0] == RATTR_OFF) rd_val = {30'd0, rd_attr};
        end else begin
            case (s_axil_araddr)
                `CSR_STATUS:        rd_val = {16'd0, err_code, 5'd0, error, done, busy};
                `CSR_VERSION:       rd_val = `CFG_VERSION;
                `CSR_CONFIG_ID:     rd_val = `CFG_CONFIG_ID;
                `CSR_INSN_ADDR_LO:  rd_val = insn_addr_lo;
                `CSR_INSN_ADDR_HI:  rd_val = insn_addr_hi;
                `CSR_INSN_COUNT:    rd_val = insn_count;
                `CSR_ERR_PC:        rd_val = err_pc;
                `CSR_CYCLES_LO:     rd_val = cycles[31:0];
                `CSR_CYCLES_HI:     rd_val = cycles[63:32];
                `CSR_LOAD_BUSY:     rd_val = c_load_busy;
                `CSR_COMPUTE_BUSY:  rd_val = c_compute_busy;
                `CSR_STORE_BUSY:    rd_val = c_store_busy;
                `CSR_LOAD_STALL:    rd_val = c_load_stall;
                `CSR_COMPUTE_STALL: rd_val = c_compute_stall;
                `CSR_STORE_STALL:   rd_val = c_store_stall;
                `CSR_LOAD_INSNS:    rd_val = c_load_insns;
                `CSR_COMPUTE_INSNS: rd_val = c_compute_insns;
                `CSR_STORE_INSNS:   rd_val = c_store_insns;
                `CSR_DMA_RD_BYTES:  rd_val = c_rd_bytes;
                `CSR_DMA_WR_BYTES:  rd_val = c_wr_bytes;
                `CSR_FETCH_BYTES:   rd_val = c_fetch_bytes;
                `CSR_COMPUTE_WAIT:  rd_val = c_compute_wait;
                `CSR_GEMM_BUSY:     rd_val = c_gemm_busy;
                `CSR_GEMM_OPS:      rd_val = c_gemm_ops;
                default:            rd_val = 32'd0;
            endcase
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            s_axil_rvalid <= 1'b0;
            s_axil_rdata  <= 32'd0;
        end else begin
            if (s_axil_arvalid && s_axil_arready) begin
                s_axil_rvalid <= 1'b1;
                s_axil_rdata  <= rd_val;
            end else if (s_axil_rvalid && s_axil_rready) begin
                s_axil_rvalid <= 1'b0;
            end
        end
    end

    wire unused_csr = ^{s_axil_awprot, s_axil_arprot};
endmodule
