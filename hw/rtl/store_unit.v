// store_unit: executes STORE (accumulator buffer -> DRAM, each lane narrowed to OUT_WIDTH
// bits as a C cast would, 2-D with stride) inside unit_shell (IDLE -> WAIT -> EXEC -> PUSH; it
// pops c2s on pop_prev, pushes s2c on push_prev).
//   WAIT : range checks (ERR_DRAM_RANGE, then ERR_SRAM_RANGE)
//   EXEC : for each row, write bursts back to back (min(MAX_BURST, beats left in the
//          row, beats to 4 KiB)); a burst ends with its B response. A burst under way
//          completes after a halt. Vectors are read from the accumulator SRAM (copy S, whose
//          read port STORE owns when it reads) one cycle before their first W beat: at the
//          grant when the burst starts with a new vector, and at the last beat of a vector
//          when the next one starts within the same burst; the narrowed vector is used
//          straight from the SRAM's output and kept in `oshift` for its later beats.
//          With write bursts in flight (WIF > 1) the unit posts its writes: it asks for the next
//          burst the cycle after a burst's last W beat, without waiting for its B, and EXEC ends
//          with the B of its last burst (so the s2c token of PUSH still follows every B).
`include "accel_params.vh"

module store_unit (
    input  wire                            clk,
    input  wire                            rst,
    input  wire                            clr,
    input  wire                            halt,
    // store queue
    input  wire                            q_empty,
    input  wire [`INSN_BITS+31:0]          q_dout,
    output wire                            q_pop,
    // tokens
    input  wire                            c2s_avail,
    output wire                            c2s_pop,
    input  wire                            s2c_full,
    output wire                            s2c_push,
    // DRAM regions
    input  wire [`CFG_MAX_REGIONS*32-1:0]  rbase,
    input  wire [`CFG_MAX_REGIONS*32-1:0]  rsize,
    input  wire [`CFG_MAX_REGIONS*2-1:0]   rattr,
    // DRAM port
    output wire                            req,
    output wire [31:0]                     req_addr,
    output wire [8:0]                      req_len,
    input  wire                            gnt,
    input  wire                            wr_beat,    // W handshake of this unit's burst
    output wire [`CFG_BUS_WIDTH-1:0]       wr_data,
    input  wire                            burst_done, // B handshake
    // accumulator read port (copy S; STORE has priority on it)
    output wire                            acc_re,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_raddr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]    acc_rdata,
    // status
    output wire                            err,
    output wire [7:0]                      err_code,
    output wire [31:0]                     pc_out,
    output wire                            idle,
    output wire                            exec,
    output wire                            stall,
    output wire                            stuck,
    output wire                            insn_done
);
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam BUS = `CFG_BUS_WIDTH;
    localparam OVB = `CFG_OUT_VEC_BITS;
    localparam OW  = `CFG_OUT_WIDTH;
    localparam [33:0] DEPTH = `CFG_ACC_DEPTH;
    localparam        POST  = (`CFG_DRAM_WRITES_IN_FLIGHT > 1);  // posted writes

    wire [`INSN_BITS-1:0] insn;
    wire                  start;
    wire                  exec_done;
    wire                  exec_stop;

    // ---- fields
    // its bits above an accumulator index matter to the range check only, which reads them
    // from the queue's head (below)
    /* verilator lint_off UNUSEDSIGNAL */
    wire [SIB-1:0]  sram_base = insn[`F_MEM_SRAM_BASE_LO +: `F_MEM_SRAM_BASE_W];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [31:0]     dram_base = insn[`F_MEM_DRAM_BASE_LO +: `F_MEM_DRAM_BASE_W];
    wire [15:0]     y_size    = insn[`F_MEM_Y_SIZE_LO +: `F_MEM_Y_SIZE_W];
    wire [15:0]     x_size    = insn[`F_MEM_X_SIZE_LO +: `F_MEM_X_SIZE_W];
    wire [15:0]     x_stride  = insn[`F_MEM_X_STRIDE_LO +: `F_MEM_X_STRIDE_W];

    // ---- range checks. What they compute from the instruction alone (the span and vector-count
    // products and the sums after them) is computed from the queue's head in the IDLE cycle that
    // pops it, into registers loaded at the edge at which unit_shell loads `insn`: they always
    // hold these functions of `insn`, so WAIT starts from registers (timing).
    function [63:0] dram_hi_of;  // the end of the DRAM bytes written (exclusive)
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [33:0]           span;
        begin
            span = {18'd0, w[`F_MEM_Y_SIZE_LO +: 16] - 16'd1} * {18'd0, w[`F_MEM_X_STRIDE_LO +: 16]}
                 + {18'd0, w[`F_MEM_X_SIZE_LO +: 16]};
            dram_hi_of = ({32'd0, w[`F_MEM_DRAM_BASE_LO +: 32]} << `CFG_OUT_VEC_BYTES_LOG2)
                       + ({30'd0, span} << `CFG_OUT_VEC_BYTES_LOG2);
        end
    endfunction
    function sram_bad_of;  // the vectors read do not fit in the accumulator from sram_base
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [31:0]           vecs;
        begin
            vecs = {16'd0, w[`F_MEM_Y_SIZE_LO +: 16]} * {16'd0, w[`F_MEM_X_SIZE_LO +: 16]};
            sram_bad_of = (w[`F_MEM_Y_SIZE_LO +: 16] != 16'd0) && (w[`F_MEM_X_SIZE_LO +: 16] != 16'd0)
                        && ({{(34-SIB){1'b0}}, w[`F_MEM_SRAM_BASE_LO +: SIB]} + {2'd0, vecs} > DEPTH);
        end
    endfunction
    reg  [63:0] dram_hi;
    reg         sram_bad;
    always @(posedge clk) begin
        if (rst || clr) begin  // the values of insn's reset value (all zeros)
            dram_hi  <= dram_hi_of({`INSN_BITS{1'b0}});
            sram_bad <= sram_bad_of({`INSN_BITS{1'b0}});
        end else if (q_pop) begin
            dram_hi  <= dram_hi_of(q_dout[`INSN_BITS-1:0]);
            sram_bad <= sram_bad_of(q_dout[`INSN_BITS-1:0]);
        end
    end
    wire        has_data = (y_size != 16'd0) && (x_size != 16'd0);
    wire [63:0] dram_lo  = {32'd0, dram_base} << `CFG_OUT_VEC_BYTES_LOG2;
    wire        dram_ok;
    region_check u_rc (.lo(dram_lo), .hi(dram_hi), .need_write(1'b1), .rbase(rbase), .rsize(rsize),
                       .rattr(rattr), .ok(dram_ok));
    wire        dram_bad = has_data && !dram_ok;
    wire        range_bad = dram_bad || sram_bad;

    assign err_code = dram_bad ? `ERR_DRAM_RANGE : `ERR_SRAM_RANGE;

    // next-stage tokens: none (a STORE with pop_next / push_next is rejected at dispatch)
    wire no_next_pop, no_next_push;
    unit_shell #(.HAS_PREV(1), .HAS_NEXT(0)) u_shell (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(q_empty), .q_dout(q_dout), .q_pop(q_pop),
        .prev_avail(c2s_avail), .prev_pop(c2s_pop), .prev_full(s2c_full), .prev_push(s2c_push),
        .next_avail(1'b0), .next_pop(no_next_pop), .next_full(1'b0), .next_push(no_next_push),
        .insn(insn), .start(start), .range_bad(range_bad), .exec_done(exec_done), .exec_stop(exec_stop),
        .exec_stuck(1'b0),
        .err(err), .pc_out(pc_out), .idle(idle), .exec(exec), .stall(stall), .stuck(stuck),
        .insn_done(insn_done)
    );

    // ---- EXEC
    reg [15:0]    r;           // data row
    reg [IDX-1:0] a;           // accumulator index of the vector being written
    reg [31:0]    row_addr;
    reg [31:0]    cur_addr;
    reg [31:0]    row_beats;
    reg           in_burst;
    reg [8:0]     blen;
    reg [8:0]     bbeat;       // beat within the burst
    reg [15:0]    obeat;       // beat within the output vector
    reg [OVB-1:0] oshift;      // the current output vector from its next beat on
    reg           fresh;       // the current vector is on the SRAM's output (read last cycle)
    reg           sent;        // posted: every burst's W data are sent
    reg [3:0]     bpend;       // posted: bursts granted and not yet answered by B

    wire [31:0] x_beats      = {16'd0, x_size} * `CFG_BEATS_PER_OUT_VEC;
    wire [31:0] stride_bytes = {16'd0, x_stride} << `CFG_OUT_VEC_BYTES_LOG2;
    wire [9:0]  bbeat_next   = {1'b0, bbeat} + 10'd1;
    wire        burst_last   = (bbeat_next == {1'b0, blen});
    // the unit's burst ends: at its B, or (posted) at its last W beat
    wire        seg_end      = in_burst && (POST ? (wr_beat && burst_last) : burst_done);
    wire        row_end      = seg_end && ({23'd0, blen} == row_beats);
    wire        fin          = row_end && (r + 16'd1 == y_size);
    // EXEC ends with the last row's last B, or at once (no data); a halt stops it between bursts
    wire        posted_done  = sent && burst_done && (bpend == 4'd1);
    assign exec_done = (POST ? posted_done : fin) || (!in_burst && !halt && !has_data);
    assign exec_stop = !in_burst && halt;

    // narrowing: each lane keeps its low OUT_WIDTH bits
    wire [OVB-1:0] narrow;
    genvar l;
    generate
        for (l = 0; l < `CFG_LANES; l = l + 1) begin : g_lane
            assign narrow[l*OW +: OW] = acc_rdata[l*32 +: OW];
        end
    endgenerate
    wire [OVB-1:0] cur        = fresh ? narrow : oshift;
    wire           first_beat = (obeat == 16'd0);
    wire           vec_last   = (obeat == `CFG_BEATS_PER_OUT_VEC - 1);
    wire           granted    = exec && !in_burst && !halt && has_data && gnt;
    wire           next_in    = in_burst && wr_beat && vec_last && !burst_last;

    burst_calc u_len (.page_off(cur_addr[11:0]), .beats_left(row_beats), .len(req_len));
    assign req       = exec && !in_burst && !halt && has_data && !sent;  // posted: none after the last
    assign req_addr  = cur_addr;
    assign acc_re    = (granted && first_beat) || next_in;
    assign acc_raddr = next_in ? a + 1'b1 : a;
    assign wr_data   = cur[BUS-1:0];

    always @(posedge clk) begin
        if (rst || clr) begin
            r         <= 16'd0;
            a         <= {IDX{1'b0}};
            row_addr  <= 32'd0;
            cur_addr  <= 32'd0;
            row_beats <= 32'd0;
            in_burst  <= 1'b0;
            blen      <= 9'd0;
            bbeat     <= 9'd0;
            obeat     <= 16'd0;
            oshift    <= {OVB{1'b0}};
            fresh     <= 1'b0;
            sent      <= 1'b0;
            bpend     <= 4'd0;
        end else if (start) begin
            r         <= 16'd0;
            a         <= sram_base[IDX-1:0];
            row_addr  <= dram_lo[31:0];
            cur_addr  <= dram_lo[31:0];
            row_beats <= x_beats;
            in_burst  <= 1'b0;
            obeat     <= 16'd0;
            fresh     <= 1'b0;
            sent      <= 1'b0;
            bpend     <= 4'd0;
        end else if (exec) begin
            if (POST) begin
                bpend <= bpend + {3'd0, granted} - {3'd0, burst_done};
                if (fin)
                    sent <= 1'b1;
            end
            fresh <= acc_re;
            if (wr_beat)
                oshift <= cur >> BUS;
            else if (fresh)
                oshift <= cur;
            if (in_burst) begin
                if (wr_beat) begin
                    bbeat <= bbeat + 9'd1;
                    obeat <= vec_last ? 16'd0 : obeat + 16'd1;
                    if (vec_last)
                        a <= a + 1'b1;
                end
                if (seg_end) begin
                    in_burst <= 1'b0;
                    if (row_end) begin
                        r         <= r + 16'd1;
                        row_addr  <= row_addr + stride_bytes;
                        cur_addr  <= row_addr + stride_bytes;
                        row_beats <= x_beats;
                    end else begin
                        cur_addr  <= cur_addr + ({23'd0, blen} << `CFG_BUS_BYTES_LOG2);
                        row_beats <= row_beats - {23'd0, blen};
                    end
                end
            end else if (granted) begin
                in_burst <= 1'b1;
                blen     <= req_len;
                bbeat    <= 9'd0;
            end
        end
    end

    // opcode and token flags (the shell's), padding (rejected at dispatch), buf (ACC), reserved bits
    wire unused_store = ^{insn[`F_HDR_PUSH_NEXT_LO:0], no_next_pop, no_next_push,
                          insn[`F_MEM_BUF_LO +: `F_MEM_BUF_W], insn[`INSN_BITS-1:`F_MEM_Y_PAD_0_LO],
                          dram_lo[63:32], acc_rdata};
endmodule
