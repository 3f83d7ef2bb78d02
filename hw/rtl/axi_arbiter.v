// axi_arbiter: the one AXI4 master port, shared by every core's FETCH (read), LOAD (read) and
// STORE (write). Each cycle it picks one requester: the core round robin among the cores with a
// request, starting after the core granted last (`last`: N-1 after reset and every START / soft
// reset, so core 0 goes first), and inside that core the highest-priority client (FETCH > LOAD >
// STORE). It grants that requester in the same cycle when the port can take its burst, else
// nobody (so a waiting write is not starved by reads that keep coming):
//   a read  when no write is under way, fewer than RIF reads are in flight (granted, last beat
//           not yet seen), the AR register is free (or handshakes now) and the client's own ID
//           has no burst in flight;
//   a write when nothing at all is in flight (writes never overlap anything).
// With WIF > 1 (write bursts in flight) the read and write channels are independent: a read needs
// no idle write side, and a write is granted when no write is in its AW/W phase, fewer than WIF
// writes await their B and its core has no orphaned write. W data follow the AW order (one write
// in its W phase at a time, no interleaving); a write's ID is its core, and B goes to the core BID
// names, in any order across IDs.
// With RIF = 1: one burst at a time on the whole port, ARID 0, R beats to the one read in flight.
// Else a read's ID is its slot {core, client} (FETCH 0, LOAD 1), R beats go to the slot RID names
// and its RLAST ends the burst: data may come back in any order across IDs.
//   read : grant -> AR (ARVALID until ARREADY) -> R beats (RREADY while reads are in flight)
//   write: grant -> W (AWVALID until AWREADY, in parallel WVALID=1 for every beat) ->
//          B (BREADY=1 until BVALID) -> idle
// Write IDs are 0 with WIF = 1, bursts INCR of full bus width, WSTRB all ones. A non-OKAY RRESP/BRESP raises
// resp_err (with the burst's owner and core). No new grant while `halt`; `abort` (soft reset)
// orphans every burst in flight: each still completes on the bus (reads are dropped, writes send
// WSTRB = 0), and its ID is not granted again before it has.
`include "accel_params.vh"

module axi_arbiter #(
    parameter N  = 1,  // cores
    parameter CB = 1,  // bits of a core index (>= 1)
    parameter RIF = 1, // read bursts in flight at most (1..8; above 1 needs N <= 8: a 4-bit ID)
    parameter WIF = 1  // write bursts in flight at most (1..8; above 1 needs N <= 8)
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
    localparam [1:0] W_IDLE = 2'd0, W_W = 2'd1, W_B = 2'd2;
    localparam [1:0] O_NONE = 2'd0, O_FETCH = 2'd1, O_LOAD = 2'd2, O_STORE = 2'd3;
    localparam [2:0] AXSIZE = `CFG_BUS_BYTES_LOG2;
    localparam integer SB = CB + 1;  // bits of a read slot: FETCH (even) and LOAD (odd) of each core
    localparam integer NSP = 1 << SB; // slot flags, indexable by every SB-bit value (N may be below 2^CB)
    localparam integer LAST_I    = N - 1;
    localparam [CB-1:0] LAST_CORE = LAST_I[CB-1:0];
    localparam integer  RIF_I     = RIF;
    localparam [5:0]    RIF_MAX   = RIF_I[5:0];
    localparam          MW        = (WIF > 1);  // writes in flight
    localparam integer  WIF_I     = WIF;
    localparam [3:0]    WIF_MAX   = WIF_I[3:0];

    reg [CB-1:0] last;     // the core granted last
    reg [31:0]   addr;     // the granted burst's address and beats - 1 (AR or AW)
    reg [7:0]    lenm1;
    // read side
    reg          ar_pend;  // an AR waits for its handshake
    reg [SB-1:0] ar_slot;  // the slot of the last read granted (its AR ID)
    reg [NSP-1:0] rbusy;    // the slot's read burst is in flight
    reg [NSP-1:0] rorph;    // ... and was orphaned by abort
    reg [5:0]    rcount;   // reads in flight
    // write side
    reg [1:0]    wstate;
    reg          wown;     // the write burst still has its STORE (abort clears it)
    reg [CB-1:0] wcore;    // the write burst's core
    reg [7:0]    cnt;      // W beats done
    reg [31:0]   waddr;    // WIF > 1: the write burst's address and beats - 1 (AW)
    reg [7:0]    wlenm1;
    reg [3:0]    wout;     // writes granted and not yet answered by B (WIF > 1)
    reg [N*4-1:0] wpc;     // ... of each core
    reg [N-1:0]  worph;    // the core's writes in flight were orphaned by abort (WIF > 1)
    reg          aw_done;
    reg          w_done;

    // ---- arbitration (combinational): the first core with a request after `last`, scanned from
    // the farthest (last itself) to the nearest so the nearest wins
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
    wire sf = f_req[sel];
    wire sl = l_req[sel];
    wire ss = s_req[sel];
    wire [SB-1:0] sel_slot = {sel, !sf};  // the read slot of the chosen core's FETCH or LOAD
    wire ar_free = !ar_pend || m_axi_arready;
    wire rd_ok   = (MW || (wstate == W_IDLE)) && (rcount < RIF_MAX) && ar_free && !rbusy[sel_slot];
    wire wr_ok   = (wstate == W_IDLE) && (MW ? ((wout < WIF_MAX) && !worph[sel]) : (rcount == 6'd0));
    wire can_grant = !halt && !abort && sel_v && ((sf || sl) ? rd_ok : wr_ok);
    wire gnt_rd = can_grant && (sf || sl);
    wire gnt_wr = can_grant && !sf && !sl;

    // ---- handshakes; the slot of an R beat
    wire ar_hs = m_axi_arvalid && m_axi_arready;
    wire r_hs  = m_axi_rvalid && m_axi_rready;
    wire aw_hs = m_axi_awvalid && m_axi_awready;
    wire w_hs  = m_axi_wvalid && m_axi_wready;
    wire b_hs  = m_axi_bvalid && m_axi_bready;
    wire [31:0] aw_addr  = MW ? waddr : addr;
    wire [7:0]  aw_lenm1 = MW ? wlenm1 : lenm1;
    wire w_last = w_hs && (cnt == aw_lenm1);
    // the core a B answers (its ID with writes in flight, else the one write's) and whether it has a client
    wire [31:0]   bid32  = {28'd0, m_axi_bid};
    wire [CB-1:0] bcore  = MW ? bid32[CB-1:0] : wcore;
    wire          b_own  = MW ? !worph[bcore] : wown;
    wire [31:0]   rid32   = {28'd0, m_axi_rid};
    wire [SB-1:0] rs      = (RIF == 1) ? ar_slot : rid32[SB-1:0];
    wire          r_end   = r_hs && m_axi_rlast && rbusy[rs];   // a burst in flight ends
    wire          r_mine  = r_hs && rbusy[rs] && !rorph[rs];    // a beat for a client
    wire [CB-1:0] rcore   = rs[SB-1:1];
    wire [NSP-1:0] slot_oh = {{(NSP-1){1'b0}}, 1'b1} << sel_slot;
    wire [NSP-1:0] end_oh  = {{(NSP-1){1'b0}}, r_end} << rs;

    // writes in flight per core after this edge
    reg [N*4-1:0] wpc_next;
    integer j, m;
    always @(*) begin
        for (j = 0; j < N; j = j + 1)
            wpc_next[j*4 +: 4] = wpc[j*4 +: 4] + {3'd0, gnt_wr && (sel == j[CB-1:0])}
                                 - {3'd0, b_hs && (bcore == j[CB-1:0])};
    end

    genvar gc;
    generate
        for (gc = 0; gc < N; gc = gc + 1) begin : g_gnt
            wire mine = can_grant && (sel == gc);
            assign f_gnt[gc] = mine && sf;
            assign l_gnt[gc] = mine && sl && !sf;
            assign s_gnt[gc] = mine && ss && !sf && !sl;
            assign f_beat[gc] = r_mine && (rcore == gc) && !rs[0];
            assign l_beat[gc] = r_mine && (rcore == gc) && rs[0];
            assign s_beat[gc] = w_hs && wown && (wcore == gc);
            assign f_done[gc] = f_beat[gc] && m_axi_rlast;
            assign l_done[gc] = l_beat[gc] && m_axi_rlast;
            assign s_done[gc] = b_hs && b_own && (bcore == gc);
            assign core_busy[gc] = (|rbusy[2*gc +: 2]) || (|rorph) ||
                                   ((wstate != W_IDLE) && (!wown || (wcore == gc))) ||
                                   (MW && ((wpc[gc*4 +: 4] != 4'd0) || (|worph)));
        end
    endgenerate

    always @(posedge clk) begin
        if (rst) begin
            last    <= LAST_CORE;
            addr    <= 32'd0;
            lenm1   <= 8'd0;
            ar_pend <= 1'b0;
            ar_slot <= {SB{1'b0}};
            rbusy   <= {NSP{1'b0}};
            rorph   <= {NSP{1'b0}};
            rcount  <= 6'd0;
            wstate  <= W_IDLE;
            wown    <= 1'b0;
            wcore   <= {CB{1'b0}};
            cnt     <= 8'd0;
            aw_done <= 1'b0;
            w_done  <= 1'b0;
            waddr   <= 32'd0;
            wlenm1  <= 8'd0;
            wout    <= 4'd0;
            wpc     <= {(N*4){1'b0}};
            worph   <= {N{1'b0}};
        end else begin
            if (clr)
                last <= LAST_CORE;
            else if (can_grant)
                last <= sel;
            // one address register for AR and AW, unless a read may be granted while an AW waits
            if (gnt_rd) begin
                addr  <= sf ? f_addr[sel*32 +: 32] : l_addr[sel*32 +: 32];
                lenm1 <= (sf ? f_len[sel*9 +: 8] : l_len[sel*9 +: 8]) - 8'd1;
            end else if (gnt_wr && !MW) begin
                addr  <= s_addr[sel*32 +: 32];
                lenm1 <= s_len[sel*9 +: 8] - 8'd1;
            end
            if (gnt_wr && MW) begin
                waddr  <= s_addr[sel*32 +: 32];
                wlenm1 <= s_len[sel*9 +: 8] - 8'd1;
            end
            // reads: the AR register, the slots in flight and their count
            if (gnt_rd) begin
                ar_pend <= 1'b1;
                ar_slot <= sel_slot;
            end else if (ar_hs)
                ar_pend <= 1'b0;
            rbusy  <= (rbusy | (gnt_rd ? slot_oh : {NSP{1'b0}})) & ~end_oh;
            rorph  <= (abort ? rbusy : rorph) & ~end_oh;
            rcount <= rcount + {5'd0, gnt_rd} - {5'd0, r_end};
            // writes
            if (abort)
                wown <= 1'b0;
            if (MW) begin
                wout <= wout + {3'd0, gnt_wr} - {3'd0, b_hs};
                for (m = 0; m < N; m = m + 1) begin
                    wpc[m*4 +: 4] <= wpc_next[m*4 +: 4];
                    // abort orphans every write in flight (no grant then); the flag clears with the
                    // core's last B
                    if (abort)
                        worph[m] <= (wpc_next[m*4 +: 4] != 4'd0);
                    else if (wpc_next[m*4 +: 4] == 4'd0)
                        worph[m] <= 1'b0;
                end
            end
            case (wstate)
                W_IDLE: begin
                    cnt     <= 8'd0;
                    aw_done <= 1'b0;
                    w_done  <= 1'b0;
                    if (gnt_wr) begin
                        wstate <= W_W;
                        wown   <= 1'b1;
                        wcore  <= sel;
                    end
                end
                W_W: begin
                    if (aw_hs)
                        aw_done <= 1'b1;
                    if (w_hs)
                        cnt <= cnt + 8'd1;
                    if (w_last)
                        w_done <= 1'b1;
                    if ((aw_done || aw_hs) && (w_done || w_last))
                        wstate <= MW ? W_IDLE : W_B;  // with writes in flight B is counted apart
                end
                W_B: if (b_hs) wstate <= W_IDLE;
                default: wstate <= W_IDLE;
            endcase
        end
    end

    // ---- client side
    wire rd_err = r_mine && (m_axi_rresp != 2'b00);
    assign rd_data   = m_axi_rdata;
    // an R and a B error in one cycle (writes in flight): the read's is reported
    assign resp_err  = rd_err || (b_hs && b_own && (m_axi_bresp != 2'b00));
    assign err_owner = rd_err ? (rs[0] ? O_LOAD : O_FETCH) : (b_own ? O_STORE : O_NONE);
    assign err_core  = rd_err ? rcore : bcore;
    assign idle      = (rcount == 6'd0) && (wstate == W_IDLE) && (wout == 4'd0);
    assign dbg_rd    = (rcount != 6'd0);
    assign dbg_wr    = (wstate != W_IDLE) || (wout != 4'd0);

    // ---- AXI4 master outputs
    wire [31:0] arid32 = {{(32-SB){1'b0}}, ar_slot};
    assign m_axi_arid    = (RIF == 1) ? 4'd0 : arid32[3:0];  // one read at a time needs no ID
    assign m_axi_araddr  = addr;
    assign m_axi_arlen   = lenm1;
    assign m_axi_arsize  = AXSIZE;
    assign m_axi_arburst = 2'b01;  // INCR
    assign m_axi_arlock  = 1'b0;
    assign m_axi_arcache = 4'b0011;
    assign m_axi_arprot  = 3'b000;
    assign m_axi_arvalid = ar_pend;
    assign m_axi_rready  = (rcount != 6'd0);

    wire [31:0] awid32 = {{(32-CB){1'b0}}, wcore};
    assign m_axi_awid    = MW ? awid32[3:0] : 4'd0;  // with writes in flight: the core
    assign m_axi_awaddr  = aw_addr;
    assign m_axi_awlen   = aw_lenm1;
    assign m_axi_awsize  = AXSIZE;
    assign m_axi_awburst = 2'b01;  // INCR
    assign m_axi_awlock  = 1'b0;
    assign m_axi_awcache = 4'b0011;
    assign m_axi_awprot  = 3'b000;
    assign m_axi_awvalid = (wstate == W_W) && !aw_done;
    assign m_axi_wvalid  = (wstate == W_W) && !w_done;
    assign m_axi_wlast   = (cnt == aw_lenm1);
    assign m_axi_wdata   = wown ? s_wdata[wcore*`CFG_BUS_WIDTH +: `CFG_BUS_WIDTH] : {`CFG_BUS_WIDTH{1'b0}};
    assign m_axi_wstrb   = wown ? {`CFG_BUS_BYTES{1'b1}} : {`CFG_BUS_BYTES{1'b0}};
    assign m_axi_bready  = MW ? (wout != 4'd0) : (wstate == W_B);

    // (the length's bit 8 is never set: MAX_BURST <= 256; RID's and BID's bits above a slot index
    // or a core, all of RID with RIF = 1 and of BID with WIF = 1, are never looked at)
    wire unused_axi = ^{f_len, l_len, s_len, rid32, arid32, bid32, awid32};
endmodule
