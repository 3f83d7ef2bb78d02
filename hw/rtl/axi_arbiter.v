// axi_arbiter: the one AXI4 master port, shared by every core's FETCH (read), LOAD (read) and
// STORE (write). When the port is free (state IDLE) it grants, in the same cycle, one requester:
// the core is chosen round robin among the cores with a request, starting after the core granted
// last (`last`: N-1 after reset and every START / soft reset, so core 0 goes first), and inside
// that core the highest-priority client (FETCH > LOAD > STORE). It latches the address and length
// and runs that one burst to completion before granting again; transactions never overlap.
//   read : IDLE(grant) -> AR (ARVALID until ARREADY) -> R (RREADY=1 until the last beat) -> IDLE
//   write: IDLE(grant) -> W (AWVALID until AWREADY, in parallel WVALID=1 for every beat) ->
//          B (BREADY=1 until BVALID) -> IDLE
// IDs are 0, bursts INCR of full bus width, WSTRB all ones. A non-OKAY RRESP/BRESP raises
// resp_err (with the owner). No new grant while `halt`; `abort` (soft reset) orphans the burst
// in flight: it still completes on the bus (reads are dropped, writes send WSTRB = 0).
`include "accel_params.vh"

module axi_arbiter #(
    parameter N  = 1,  // cores
    parameter CB = 1   // bits of a core index (>= 1)
) (
    input  wire                        clk,
    input  wire                        rst,
    input  wire                        clr,     // START / soft reset: the round robin starts again
    input  wire                        halt,
    input  wire                        abort,
    // client requests, one bit / field per core: byte address (bus aligned) and beats (1..MAX_BURST)
    input  wire [N-1:0]                f_req,
    input  wire [N*32-1:0]             f_addr,
    input  wire [N*9-1:0]              f_len,
    output wire [N-1:0]                f_gnt,
    input  wire [N-1:0]                l_req,
    input  wire [N*32-1:0]             l_addr,
    input  wire [N*9-1:0]              l_len,
    output wire [N-1:0]                l_gnt,
    input  wire [N-1:0]                s_req,
    input  wire [N*32-1:0]             s_addr,
    input  wire [N*9-1:0]              s_len,
    output wire [N-1:0]                s_gnt,
    // read beats (R handshakes) and write beats (W handshakes) of the owner's burst
    output wire [`CFG_BUS_WIDTH-1:0]   rd_data,
    output wire [N-1:0]                f_beat,
    output wire [N-1:0]                l_beat,
    output wire [N-1:0]                s_beat,
    input  wire [N*`CFG_BUS_WIDTH-1:0] s_wdata,
    // burst completion (last R handshake / B handshake), one pulse for the owner
    output wire [N-1:0]                f_done,
    output wire [N-1:0]                l_done,
    output wire [N-1:0]                s_done,
    // error response
    output wire                        resp_err,
    output wire [1:0]                  err_owner,   // 1 fetch, 2 load, 3 store
    output wire [CB-1:0]               err_core,    // the owner's core
    // status
    output wire                        idle,
    output wire [N-1:0]                core_busy,   // a burst of this core (or an orphaned one) is under way
    output wire                        dbg_rd,
    output wire                        dbg_wr,
    // AXI4 master
    output wire [3:0]                  m_axi_awid,
    output wire [31:0]                 m_axi_awaddr,
    output wire [7:0]                  m_axi_awlen,
    output wire [2:0]                  m_axi_awsize,
    output wire [1:0]                  m_axi_awburst,
    output wire                        m_axi_awlock,
    output wire [3:0]                  m_axi_awcache,
    output wire [2:0]                  m_axi_awprot,
    output wire                        m_axi_awvalid,
    input  wire                        m_axi_awready,
    output wire [`CFG_BUS_WIDTH-1:0]   m_axi_wdata,
    output wire [`CFG_BUS_BYTES-1:0]   m_axi_wstrb,
    output wire                        m_axi_wlast,
    output wire                        m_axi_wvalid,
    input  wire                        m_axi_wready,
    input  wire [3:0]                  m_axi_bid,
    input  wire [1:0]                  m_axi_bresp,
    input  wire                        m_axi_bvalid,
    output wire                        m_axi_bready,
    output wire [3:0]                  m_axi_arid,
    output wire [31:0]                 m_axi_araddr,
    output wire [7:0]                  m_axi_arlen,
    output wire [2:0]                  m_axi_arsize,
    output wire [1:0]                  m_axi_arburst,
    output wire                        m_axi_arlock,
    output wire [3:0]                  m_axi_arcache,
    output wire [2:0]                  m_axi_arprot,
    output wire                        m_axi_arvalid,
    input  wire                        m_axi_arready,
    input  wire [3:0]                  m_axi_rid,
    input  wire [`CFG_BUS_WIDTH-1:0]   m_axi_rdata,
    input  wire [1:0]                  m_axi_rresp,
    input  wire                        m_axi_rlast,
    input  wire                        m_axi_rvalid,
    output wire                        m_axi_rready
);
    localparam [2:0] S_IDLE = 3'd0, S_AR = 3'd1, S_R = 3'd2, S_W = 3'd3, S_B = 3'd4;
    localparam [1:0] O_NONE = 2'd0, O_FETCH = 2'd1, O_LOAD = 2'd2, O_STORE = 2'd3;
    localparam [2:0] AXSIZE = `CFG_BUS_BYTES_LOG2;

    reg [2:0]  state;
    reg [1:0]  owner;
    reg [CB-1:0] ocore;  // the owner's core
    reg [CB-1:0] last;   // the core granted last
    localparam integer  LAST_I    = N - 1;
    localparam [CB-1:0] LAST_CORE = LAST_I[CB-1:0];
    reg [31:0] addr;
    reg [7:0]  lenm1;    // beats - 1
    reg [7:0]  cnt;      // beats done (R or W)
    reg        aw_done;
    reg        w_done;

    // ---- arbitration (combinational grant while IDLE): the first core with a request after
    // `last`, scanned from the farthest (last itself) to the nearest so the nearest wins
    wire [N-1:0] any_req = f_req | l_req | s_req;
    reg  [CB-1:0] sel;
    reg           sel_v;
    integer i, k;
    always @(*) begin
        sel   = {CB{1'b0}};
        sel_v = 1'b0;
        for (i = N; i >= 1; i = i - 1) begin
            k = {{(32-CB){1'b0}}, last} + i;
            if (k >= N)
                k = k - N;
            if (any_req[k]) begin
                sel   = k[CB-1:0];
                sel_v = 1'b1;
            end
        end
    end
    wire can_grant = (state == S_IDLE) && !halt && !abort && sel_v;
    wire sf = f_req[sel];
    wire sl = l_req[sel];
    wire ss = s_req[sel];
    genvar gc;
    generate
        for (gc = 0; gc < N; gc = gc + 1) begin : g_gnt
            wire mine = can_grant && (sel == gc);
            assign f_gnt[gc] = mine && sf;
            assign l_gnt[gc] = mine && sl && !sf;
            assign s_gnt[gc] = mine && ss && !sf && !sl;
            assign f_beat[gc] = r_hs && (owner == O_FETCH) && (ocore == gc);
            assign l_beat[gc] = r_hs && (owner == O_LOAD) && (ocore == gc);
            assign s_beat[gc] = w_hs && (owner == O_STORE) && (ocore == gc);
            assign f_done[gc] = r_last && (owner == O_FETCH) && (ocore == gc);
            assign l_done[gc] = r_last && (owner == O_LOAD) && (ocore == gc);
            assign s_done[gc] = b_hs && (owner == O_STORE) && (ocore == gc);
            assign core_busy[gc] = (state != S_IDLE) && ((owner == O_NONE) || (ocore == gc));
        end
    endgenerate

    // ---- handshakes
    wire ar_hs = m_axi_arvalid && m_axi_arready;
    wire r_hs  = m_axi_rvalid && m_axi_rready;
    wire aw_hs = m_axi_awvalid && m_axi_awready;
    wire w_hs  = m_axi_wvalid && m_axi_wready;
    wire b_hs  = m_axi_bvalid && m_axi_bready;
    wire r_last = r_hs && (cnt == lenm1);
    wire w_last = w_hs && (cnt == lenm1);

    always @(posedge clk) begin
        if (rst) begin
            state   <= S_IDLE;
            owner   <= O_NONE;
            ocore   <= {CB{1'b0}};
            last    <= LAST_CORE;
            addr    <= 32'd0;
            lenm1   <= 8'd0;
            cnt     <= 8'd0;
            aw_done <= 1'b0;
            w_done  <= 1'b0;
        end else begin
            if (abort)
                owner <= O_NONE;
            if (clr)
                last <= LAST_CORE;
            case (state)
                S_IDLE: begin
                    cnt     <= 8'd0;
                    aw_done <= 1'b0;
                    w_done  <= 1'b0;
                    if (can_grant) begin
                        ocore <= sel;
                        if (!clr)
                            last <= sel;
                    end
                    if (can_grant && sf) begin
                        state <= S_AR; owner <= O_FETCH; addr <= f_addr[sel*32 +: 32];
                        lenm1 <= f_len[sel*9 +: 8] - 8'd1;
                    end else if (can_grant && sl) begin
                        state <= S_AR; owner <= O_LOAD;  addr <= l_addr[sel*32 +: 32];
                        lenm1 <= l_len[sel*9 +: 8] - 8'd1;
                    end else if (can_grant && ss) begin
                        state <= S_W;  owner <= O_STORE; addr <= s_addr[sel*32 +: 32];
                        lenm1 <= s_len[sel*9 +: 8] - 8'd1;
                    end
                end
                S_AR: if (ar_hs) state <= S_R;
                S_R: begin
                    if (r_hs)
                        cnt <= cnt + 8'd1;
                    if (r_last)
                        state <= S_IDLE;
                end
                S_W: begin
                    if (aw_hs)
                        aw_done <= 1'b1;
                    if (w_hs)
                        cnt <= cnt + 8'd1;
                    if (w_last)
                        w_done <= 1'b1;
                    if ((aw_done || aw_hs) && (w_done || w_last))
                        state <= S_B;
                end
                S_B: if (b_hs) state <= S_IDLE;
                default: state <= S_IDLE;
            endcase
        end
    end

    // ---- client side
    assign rd_data   = m_axi_rdata;
    assign resp_err  = (owner != O_NONE) &&
                       ((r_hs && (m_axi_rresp != 2'b00)) || (b_hs && (m_axi_bresp != 2'b00)));
    assign err_owner = owner;
    assign err_core  = ocore;
    assign idle      = (state == S_IDLE);
    assign dbg_rd    = (state == S_AR) || (state == S_R);
    assign dbg_wr    = (state == S_W) || (state == S_B);

    // ---- AXI4 master outputs
    assign m_axi_arid    = 4'd0;
    assign m_axi_araddr  = addr;
    assign m_axi_arlen   = lenm1;
    assign m_axi_arsize  = AXSIZE;
    assign m_axi_arburst = 2'b01;  // INCR
    assign m_axi_arlock  = 1'b0;
    assign m_axi_arcache = 4'b0011;
    assign m_axi_arprot  = 3'b000;
    assign m_axi_arvalid = (state == S_AR);
    assign m_axi_rready  = (state == S_R);

    assign m_axi_awid    = 4'd0;
    assign m_axi_awaddr  = addr;
    assign m_axi_awlen   = lenm1;
    assign m_axi_awsize  = AXSIZE;
    assign m_axi_awburst = 2'b01;  // INCR
    assign m_axi_awlock  = 1'b0;
    assign m_axi_awcache = 4'b0011;
    assign m_axi_awprot  = 3'b000;
    assign m_axi_awvalid = (state == S_W) && !aw_done;
    assign m_axi_wvalid  = (state == S_W) && !w_done;
    assign m_axi_wlast   = (cnt == lenm1);
    assign m_axi_wdata   = (owner == O_STORE) ? s_wdata[ocore*`CFG_BUS_WIDTH +: `CFG_BUS_WIDTH] : {`CFG_BUS_WIDTH{1'b0}};
    assign m_axi_wstrb   = (owner == O_STORE) ? {`CFG_BUS_BYTES{1'b1}} : {`CFG_BUS_BYTES{1'b0}};
    assign m_axi_bready  = (state == S_B);

    // IDs and RLAST are not needed: one transaction at a time, beats are counted.
    // (the length's bit 8 is never set: MAX_BURST <= 256)
    wire unused_axi = ^{m_axi_bid, m_axi_rid, m_axi_rlast, f_len, l_len, s_len};
endmodule
