// Fast simulation-only DRAM model: an AXI4 slave with the timing of docs/microarch.md.
//
// Not synthesizable and not part of hw/rtl: it exists so the cocotb testbench can run a
// Program without waking Python on every cycle. Timing (the contract the TLM models):
//   * ARREADY is 1 while fewer than RD_QUEUE read bursts are accepted and unfinished, so a
//     new AR may be taken every cycle, with earlier bursts still outstanding. Bursts answer
//     in AR order, each with its ARID on RID; a burst's first R beat is valid so that its
//     handshake can happen exactly RD_LAT cycles after its AR handshake, or in the cycle
//     after the previous burst's last beat if that is later (beats of different bursts never
//     overlap), then one beat per cycle (RREADY low holds the beat). With one burst at a
//     time this is the plain "first beat RD_LAT cycles after AR".
//   * AWREADY is 1 while fewer than WR_QUEUE write bursts are accepted and unanswered (B not
//     handshaken), so a new AW may be taken while earlier bursts await data or B. W beats fill
//     the bursts in AW order. WREADY is 1 while a burst awaits data and, when none does, in
//     the cycle an AW is taken (so AW and the first W can handshake together); a W offered
//     before its AW waits. B responses come in AW order, each with its AWID on BID; BVALID is
//     set so a burst's B handshake can happen exactly WR_LAT cycles after its last W
//     handshake, or in the cycle after the previous B handshake if that is later.
//   * Beats whose address is at or beyond MEM_BYTES answer SLVERR (reads return 0,
//     writes are dropped). Reads and writes are independent.
// Bulk access for the testbench (Python off the per-cycle path):
//   * tb_load  (one cycle high): $readmemh(+DRAM_IN=<file>) into the array from word 0.
//   * tb_dump  (one cycle high): $writememh(+DRAM_OUT=<file>) of words [0, tb_words).
//   * tb_clear (one cycle high): zero words [0, tb_words).
// Protocol checks (burst type, size, alignment, length, 4 KiB crossing, WLAST) print a
// message and set the sticky proto_err output, which the testbench reports as a failure.
// No `timescale here: the runner passes 1ns/1ps to the simulator for every file.

// The memory array and the burst bookkeeping use blocking assignments on purpose: a
// testbench model that reads what it just wrote within one clocked block.
/* verilator lint_off BLKSEQ */
module dram_model #(
    parameter DATA_W    = 64,
    parameter ID_W      = 4,
    parameter MEM_BYTES = 65536,   // bytes the array holds (a power of two)
    parameter RD_LAT    = 16,      // 0: from plusarg +DRAM_READ_LATENCY=<n> (required then)
    parameter WR_LAT    = 8,       // 0: from plusarg +DRAM_WRITE_LATENCY=<n> (required then)
    parameter MAX_BURST = 256,     // longest burst the master may issue (checked)
    parameter RD_QUEUE  = 8,       // read bursts accepted and not finished, at most
    parameter WR_QUEUE  = 8        // write bursts accepted and not answered, at most
) (
    input  wire              clk,
    input  wire              rst,
    // AXI4 slave
    input  wire [ID_W-1:0]   s_axi_awid,
    input  wire [31:0]       s_axi_awaddr,
    input  wire [7:0]        s_axi_awlen,
    input  wire [2:0]        s_axi_awsize,
    input  wire [1:0]        s_axi_awburst,
    input  wire              s_axi_awvalid,
    output wire              s_axi_awready,
    input  wire [DATA_W-1:0] s_axi_wdata,
    input  wire [DATA_W/8-1:0] s_axi_wstrb,
    input  wire              s_axi_wlast,
    input  wire              s_axi_wvalid,
    output wire              s_axi_wready,
    output reg  [ID_W-1:0]   s_axi_bid,
    output reg  [1:0]        s_axi_bresp,
    output reg               s_axi_bvalid,
    input  wire              s_axi_bready,
    input  wire [ID_W-1:0]   s_axi_arid,
    input  wire [31:0]       s_axi_araddr,
    input  wire [7:0]        s_axi_arlen,
    input  wire [2:0]        s_axi_arsize,
    input  wire [1:0]        s_axi_arburst,
    input  wire              s_axi_arvalid,
    output wire              s_axi_arready,
    output reg  [ID_W-1:0]   s_axi_rid,
    output reg  [DATA_W-1:0] s_axi_rdata,
    output reg  [1:0]        s_axi_rresp,
    output reg               s_axi_rlast,
    output reg               s_axi_rvalid,
    input  wire              s_axi_rready,
    // testbench bulk access
    input  wire              tb_load,
    input  wire              tb_dump,
    input  wire              tb_clear,
    input  wire [31:0]       tb_words,
    output reg               proto_err
);
    localparam STRB_W   = DATA_W / 8;
    localparam OFF_BITS = $clog2(STRB_W);
    localparam WORDS    = MEM_BYTES / STRB_W;
    localparam WIDX     = $clog2(WORDS);
    localparam [63:0] MEM_BYTES64 = 64'd1 * MEM_BYTES;
    localparam [1:0] RESP_OKAY = 2'b00, RESP_SLVERR = 2'b10;
    localparam [1:0] BURST_INCR = 2'b01;

    reg [DATA_W-1:0] mem [0:WORDS-1];

    // File names come from plusargs once; Python rewrites the same files for each Program.
    reg [8*1024-1:0] in_file;
    reg [8*1024-1:0] out_file;
    integer i;
    integer rd_lat;  // cycles; set once before reset (see the parameters)
    integer wr_lat;
    initial begin
        proto_err = 1'b0;
        if (!$value$plusargs("DRAM_IN=%s", in_file)) in_file = "dram_in.hex";
        if (!$value$plusargs("DRAM_OUT=%s", out_file)) out_file = "dram_out.hex";
        rd_lat = RD_LAT;
        wr_lat = WR_LAT;
        // A zero parameter makes the latency a run-time input: one build serves every latency.
        if (RD_LAT == 0) begin
            if (!$value$plusargs("DRAM_READ_LATENCY=%d", rd_lat)) rd_lat = 0;
        end
        if (WR_LAT == 0) begin
            if (!$value$plusargs("DRAM_WRITE_LATENCY=%d", wr_lat)) wr_lat = 0;
        end
        if (rd_lat < 1 || rd_lat > 1024 || wr_lat < 1 || wr_lat > 1024) begin
            $display("dram_model: latencies read %0d / write %0d: each must be 1..1024 cycles (parameters or plusargs +DRAM_READ_LATENCY, +DRAM_WRITE_LATENCY)",
                     rd_lat, wr_lat);
            $finish;
        end
    end

    function in_range(input [31:0] addr);
        in_range = {32'd0, addr} < MEM_BYTES64;
    endfunction

    // Word index of a byte address (only used when in_range).
    /* verilator lint_off UNUSEDSIGNAL */
    function [WIDX-1:0] widx(input [31:0] addr);
        widx = addr[OFF_BITS +: WIDX];
    endfunction
    /* verilator lint_on UNUSEDSIGNAL */

    // ---------------------------------------------------------------- read channel
    // Accepted read bursts in AR order (a ring): address, length, ID and the cycle from which
    // the first beat may be presented. The head is the burst on (or next on) the R channel.
    reg [31:0]   q_addr [0:RD_QUEUE-1];
    reg [7:0]    q_len  [0:RD_QUEUE-1];
    reg [ID_W-1:0] q_id [0:RD_QUEUE-1];
    reg [63:0]   q_due  [0:RD_QUEUE-1];
    integer      q_head;
    integer      q_tail;
    integer      q_cnt;       // bursts accepted and not finished
    reg [63:0]   now;         // index of the current cycle (since reset)
    reg [31:0]   rd_addr;     // byte address of the beat on the R channel
    reg [7:0]    rd_left;     // beats after the current one
    reg          rv;          // RVALID after this edge (blocking scratch)
    reg          ar_take;     // an AR handshake at this edge (blocking scratch)
    assign s_axi_arready = (q_cnt < RD_QUEUE);

    // ---------------------------------------------------------------- write channel
    // The burst taking W beats (w_busy), the accepted AWs after it (a ring), and the bursts
    // whose last W arrived, awaiting B (a ring: the cycle from which B may be presented).
    reg          w_busy;
    reg [31:0]   w_addr;      // byte address of the next W beat
    reg [8:0]    w_left;      // beats expected including the next one
    reg          w_err;       // an earlier beat of this burst was beyond the array
    reg [ID_W-1:0] w_id;
    reg [31:0]   aw_addr [0:WR_QUEUE-1];
    reg [8:0]    aw_beats[0:WR_QUEUE-1];
    reg [ID_W-1:0] aw_id [0:WR_QUEUE-1];
    integer      aw_head;
    integer      aw_tail;
    integer      aw_cnt;
    reg [1:0]    b_resp [0:WR_QUEUE-1];
    reg [ID_W-1:0] b_id [0:WR_QUEUE-1];
    reg [63:0]   b_due  [0:WR_QUEUE-1];
    integer      b_head;
    integer      b_tail;
    integer      b_cnt;
    integer      wr_open;     // bursts accepted and B not handshaken
    reg          bv;          // BVALID after this edge (blocking scratch)
    reg          aw_take;     // an AW handshake at this edge (blocking scratch)
    reg          w_take;      // a W handshake at this edge (blocking scratch)
    assign s_axi_awready = (wr_open < WR_QUEUE);
    // Combinational awvalid -> wready only while no burst awaits data, so AW and the first W
    // can be accepted in the same cycle (WREADY never depends on WVALID: no loop).
    assign s_axi_wready  = w_busy || (s_axi_awvalid && s_axi_awready);

    reg [DATA_W-1:0] wmask;
    integer b;

    task check_burst(input [31:0] addr, input [7:0] len, input [2:0] size, input [1:0] burst,
                     input is_write);
        begin
            if (burst != BURST_INCR || size != OFF_BITS[2:0] || addr[OFF_BITS-1:0] != 0 ||
                {24'd0, len} + 32'd1 > MAX_BURST ||
                ({20'd0, addr[11:0]} + ({24'd0, len} + 32'd1) * STRB_W) > 32'd4096) begin
                $display("dram_model: %0t: protocol violation on %s: addr=0x%08x len=%0d size=%0d burst=%0d",
                         $time, is_write ? "AW" : "AR", addr, len, size, burst);
                proto_err <= 1'b1;
            end
        end
    endtask

    always @(posedge clk) begin
        if (tb_load) $readmemh(in_file, mem);
        if (tb_dump) $writememh(out_file, mem, 0, tb_words - 1);
        if (tb_clear)
            for (i = 0; i < WORDS; i = i + 1)
                if (i < tb_words) mem[i] = {DATA_W{1'b0}};

        if (rst) begin
            q_head        = 0;
            q_tail        = 0;
            q_cnt         = 0;
            now           = 64'd0;
            rd_addr       = 32'd0;
            rd_left       = 8'd0;
            s_axi_rvalid <= 1'b0;
            s_axi_rlast  <= 1'b0;
            s_axi_rresp  <= RESP_OKAY;
            s_axi_rdata  <= {DATA_W{1'b0}};
            s_axi_rid    <= {ID_W{1'b0}};
            w_busy        = 1'b0;
            w_addr        = 32'd0;
            w_left        = 9'd0;
            w_err         = 1'b0;
            w_id          = {ID_W{1'b0}};
            aw_head       = 0;
            aw_tail       = 0;
            aw_cnt        = 0;
            b_head        = 0;
            b_tail        = 0;
            b_cnt         = 0;
            wr_open       = 0;
            s_axi_bvalid <= 1'b0;
            s_axi_bresp  <= RESP_OKAY;
            s_axi_bid    <= {ID_W{1'b0}};
        end else begin
            // ---- read: the R handshake (next beat or pop), the AR handshake (push), then the
            // head's first beat once it is due and the channel is free
            ar_take = s_axi_arvalid && s_axi_arready;  // before the pop changes q_cnt
            rv = s_axi_rvalid;
            if (rv && s_axi_rready) begin
                if (s_axi_rlast) begin
                    rv     = 1'b0;
                    q_head = (q_head == RD_QUEUE - 1) ? 0 : q_head + 1;
                    q_cnt  = q_cnt - 1;
                end else begin
                    rd_addr = rd_addr + STRB_W;
                    rd_left = rd_left - 8'd1;
                    s_axi_rlast <= (rd_left == 8'd0);
                    s_axi_rresp <= in_range(rd_addr) ? RESP_OKAY : RESP_SLVERR;
                    s_axi_rdata <= in_range(rd_addr) ? mem[widx(rd_addr)] : {DATA_W{1'b0}};
                end
            end
            if (ar_take) begin
                check_burst(s_axi_araddr, s_axi_arlen, s_axi_arsize, s_axi_arburst, 1'b0);
                q_addr[q_tail] = s_axi_araddr;
                q_len[q_tail]  = s_axi_arlen;
                q_id[q_tail]   = s_axi_arid;
                q_due[q_tail]  = now + {32'd0, rd_lat[31:0]};
                q_tail = (q_tail == RD_QUEUE - 1) ? 0 : q_tail + 1;
                q_cnt  = q_cnt + 1;
            end
            if (!rv && q_cnt != 0 && q_due[q_head] <= now + 64'd1) begin
                rv      = 1'b1;
                rd_addr = q_addr[q_head];
                rd_left = q_len[q_head];
                s_axi_rid   <= q_id[q_head];
                s_axi_rlast <= (rd_left == 8'd0);
                s_axi_rresp <= in_range(rd_addr) ? RESP_OKAY : RESP_SLVERR;
                s_axi_rdata <= in_range(rd_addr) ? mem[widx(rd_addr)] : {DATA_W{1'b0}};
            end
            s_axi_rvalid <= rv;

            // ---- write: B handshake (pop), AW (start or queue), W beat (last: queue its B, start
            // the next queued AW), then the head's B once it is due and B is free
            aw_take = s_axi_awvalid && s_axi_awready;  // before the counts change
            w_take  = s_axi_wvalid && s_axi_wready;
            bv = s_axi_bvalid;
            if (bv && s_axi_bready) begin
                bv      = 1'b0;
                b_head  = (b_head == WR_QUEUE - 1) ? 0 : b_head + 1;
                b_cnt   = b_cnt - 1;
                wr_open = wr_open - 1;
            end
            if (aw_take) begin
                check_burst(s_axi_awaddr, s_axi_awlen, s_axi_awsize, s_axi_awburst, 1'b1);
                wr_open = wr_open + 1;
                if (!w_busy) begin
                    w_busy = 1'b1;
                    w_addr = s_axi_awaddr;
                    w_left = {1'b0, s_axi_awlen} + 9'd1;
                    w_err  = 1'b0;
                    w_id   = s_axi_awid;
                end else begin
                    aw_addr[aw_tail]  = s_axi_awaddr;
                    aw_beats[aw_tail] = {1'b0, s_axi_awlen} + 9'd1;
                    aw_id[aw_tail]    = s_axi_awid;
                    aw_tail = (aw_tail == WR_QUEUE - 1) ? 0 : aw_tail + 1;
                    aw_cnt  = aw_cnt + 1;
                end
            end
            if (w_take) begin
                if (s_axi_wlast != (w_left == 9'd1)) begin
                    $display("dram_model: %0t: protocol violation: WLAST=%0d with %0d beats left",
                             $time, s_axi_wlast, w_left);
                    proto_err <= 1'b1;
                end
                if (in_range(w_addr)) begin
                    for (b = 0; b < STRB_W; b = b + 1)
                        wmask[b*8 +: 8] = {8{s_axi_wstrb[b]}};
                    mem[widx(w_addr)] = (mem[widx(w_addr)] & ~wmask) | (s_axi_wdata & wmask);
                end else begin
                    w_err = 1'b1;
                end
                if (w_left == 9'd1 || s_axi_wlast) begin
                    b_resp[b_tail] = w_err ? RESP_SLVERR : RESP_OKAY;
                    b_id[b_tail]   = w_id;
                    b_due[b_tail]  = now + {32'd0, wr_lat[31:0]};
                    b_tail = (b_tail == WR_QUEUE - 1) ? 0 : b_tail + 1;
                    b_cnt  = b_cnt + 1;
                    w_busy = 1'b0;
                    if (aw_cnt != 0) begin
                        w_busy = 1'b1;
                        w_addr = aw_addr[aw_head];
                        w_left = aw_beats[aw_head];
                        w_err  = 1'b0;
                        w_id   = aw_id[aw_head];
                        aw_head = (aw_head == WR_QUEUE - 1) ? 0 : aw_head + 1;
                        aw_cnt  = aw_cnt - 1;
                    end
                end else begin
                    w_addr = w_addr + STRB_W;
                    w_left = w_left - 9'd1;
                end
            end
            if (!bv && b_cnt != 0 && b_due[b_head] <= now + 64'd1) begin
                bv = 1'b1;
                s_axi_bresp <= b_resp[b_head];
                s_axi_bid   <= b_id[b_head];
            end
            s_axi_bvalid <= bv;
            now = now + 64'd1;
        end
    end
endmodule
/* verilator lint_on BLKSEQ */
