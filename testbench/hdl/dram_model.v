// Fast simulation-only DRAM model: an AXI4 slave with the timing of docs/microarch.md.
//
// Not synthesizable and not part of hw/rtl: it exists so the cocotb testbench can run a
// Program without waking Python on every cycle. Timing (the contract the TLM models):
//   * ARREADY is 1 whenever no read burst is in progress; the first R beat is valid so
//     that its handshake can happen exactly RD_LAT cycles after the AR handshake, then
//     one beat per cycle (RREADY low holds the beat).
//   * AWREADY is 1 whenever no write burst is in progress. WREADY is 1 during a write
//     burst and, while idle, in the cycle an AW is offered (so AW and the first W can
//     handshake together); a W offered before its AW waits. BVALID is set so the B
//     handshake can happen exactly WR_LAT cycles after the last W handshake.
//   * Beats whose address is at or beyond MEM_BYTES answer SLVERR (reads return 0,
//     writes are dropped). One read and one write burst may be in flight together.
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
    parameter MAX_BURST = 256      // longest burst the master may issue (checked)
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
    localparam [1:0] W_IDLE = 2'd0, W_DATA = 2'd1, W_RESP = 2'd2;

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
    reg        rd_active;     // an AR was accepted and its last beat has not handshaken
    reg [10:0] rd_wait;       // latency cycles left before the first beat is presented
    reg [31:0] rd_addr;       // byte address of the beat on (or next on) the R channel
    reg [7:0]  rd_left;       // beats after the current one
    assign s_axi_arready = !rd_active;

    // ---------------------------------------------------------------- write channel
    reg [1:0]  w_state;
    reg [31:0] w_addr;        // byte address of the next W beat
    reg [8:0]  w_left;        // beats expected including the next one
    reg [10:0] w_wait;
    reg        w_err;
    assign s_axi_awready = (w_state == W_IDLE);
    // Combinational awvalid -> wready only while idle, so AW and the first W can be
    // accepted in the same cycle (WREADY never depends on WVALID: no loop).
    assign s_axi_wready  = (w_state == W_DATA) || (w_state == W_IDLE && s_axi_awvalid);

    reg [DATA_W-1:0] wmask;
    reg [31:0]       wa;
    reg [8:0]        wl;
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
            rd_active    <= 1'b0;
            rd_wait      <= 11'd0;
            rd_addr      <= 32'd0;
            rd_left      <= 8'd0;
            s_axi_rvalid <= 1'b0;
            s_axi_rlast  <= 1'b0;
            s_axi_rresp  <= RESP_OKAY;
            s_axi_rdata  <= {DATA_W{1'b0}};
            s_axi_rid    <= {ID_W{1'b0}};
            w_state      <= W_IDLE;
            w_addr       <= 32'd0;
            w_left       <= 9'd0;
            w_wait       <= 11'd0;
            w_err        <= 1'b0;
            s_axi_bvalid <= 1'b0;
            s_axi_bresp  <= RESP_OKAY;
            s_axi_bid    <= {ID_W{1'b0}};
        end else begin
            // ---- read: AR handshake, latency count, beats
            if (s_axi_arvalid && s_axi_arready) begin
                check_burst(s_axi_araddr, s_axi_arlen, s_axi_arsize, s_axi_arburst, 1'b0);
                rd_active <= 1'b1;
                rd_addr   <= s_axi_araddr;
                rd_left   <= s_axi_arlen;
                s_axi_rid <= s_axi_arid;
                if (rd_lat == 1) begin
                    s_axi_rvalid <= 1'b1;
                    s_axi_rlast  <= (s_axi_arlen == 8'd0);
                    s_axi_rresp  <= in_range(s_axi_araddr) ? RESP_OKAY : RESP_SLVERR;
                    s_axi_rdata  <= in_range(s_axi_araddr) ? mem[widx(s_axi_araddr)] : {DATA_W{1'b0}};
                end else begin
                    rd_wait <= rd_lat[10:0] - 11'd1;
                end
            end else if (rd_active) begin
                if (!s_axi_rvalid) begin
                    if (rd_wait != 11'd0) begin
                        rd_wait <= rd_wait - 11'd1;
                        if (rd_wait == 11'd1) begin
                            s_axi_rvalid <= 1'b1;
                            s_axi_rlast  <= (rd_left == 8'd0);
                            s_axi_rresp  <= in_range(rd_addr) ? RESP_OKAY : RESP_SLVERR;
                            s_axi_rdata  <= in_range(rd_addr) ? mem[widx(rd_addr)] : {DATA_W{1'b0}};
                        end
                    end
                end else if (s_axi_rready) begin
                    if (s_axi_rlast) begin
                        s_axi_rvalid <= 1'b0;
                        s_axi_rlast  <= 1'b0;
                        rd_active    <= 1'b0;
                    end else begin
                        rd_addr      <= rd_addr + STRB_W;
                        rd_left      <= rd_left - 8'd1;
                        s_axi_rlast  <= (rd_left == 8'd1);
                        s_axi_rresp  <= in_range(rd_addr + STRB_W) ? RESP_OKAY : RESP_SLVERR;
                        s_axi_rdata  <= in_range(rd_addr + STRB_W) ? mem[widx(rd_addr + STRB_W)]
                                                                   : {DATA_W{1'b0}};
                    end
                end
            end

            // ---- write: AW (+ first W), W beats, latency, B
            case (w_state)
                W_IDLE, W_DATA: begin
                    wa = w_addr;
                    wl = w_left;
                    if (w_state == W_IDLE && s_axi_awvalid) begin
                        check_burst(s_axi_awaddr, s_axi_awlen, s_axi_awsize, s_axi_awburst, 1'b1);
                        wa = s_axi_awaddr;
                        wl = {1'b0, s_axi_awlen} + 9'd1;
                        s_axi_bid <= s_axi_awid;
                        w_err     <= 1'b0;
                        w_state   <= W_DATA;
                    end
                    if (s_axi_wvalid && s_axi_wready) begin
                        if (s_axi_wlast != (wl == 9'd1)) begin
                            $display("dram_model: %0t: protocol violation: WLAST=%0d with %0d beats left",
                                     $time, s_axi_wlast, wl);
                            proto_err <= 1'b1;
                        end
                        if (in_range(wa)) begin
                            for (b = 0; b < STRB_W; b = b + 1)
                                wmask[b*8 +: 8] = {8{s_axi_wstrb[b]}};
                            mem[widx(wa)] = (mem[widx(wa)] & ~wmask) | (s_axi_wdata & wmask);
                        end else begin
                            w_err <= 1'b1;
                        end
                        if (wl == 9'd1 || s_axi_wlast) begin
                            s_axi_bresp <= (!in_range(wa) || (w_err && w_state == W_DATA)) ? RESP_SLVERR
                                                                                          : RESP_OKAY;
                            w_state <= W_RESP;
                            if (wr_lat == 1) s_axi_bvalid <= 1'b1;
                            else w_wait <= wr_lat[10:0] - 11'd1;
                        end
                        wa = wa + STRB_W;
                        wl = wl - 9'd1;
                    end
                    w_addr <= wa;
                    w_left <= wl;
                end
                W_RESP: begin
                    if (!s_axi_bvalid) begin
                        if (w_wait != 11'd0) begin
                            w_wait <= w_wait - 11'd1;
                            if (w_wait == 11'd1) s_axi_bvalid <= 1'b1;
                        end
                    end else if (s_axi_bready) begin
                        s_axi_bvalid <= 1'b0;
                        w_state      <= W_IDLE;
                    end
                end
                default: w_state <= W_IDLE;
            endcase
        end
    end
endmodule
/* verilator lint_on BLKSEQ */
