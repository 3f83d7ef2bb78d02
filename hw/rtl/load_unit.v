// load_unit: executes LOAD (DRAM -> an on-chip buffer: ACC, INP, WGT or UOP, 2-D with stride and
// zero padding) inside unit_shell (IDLE -> WAIT -> EXEC -> PUSH; it pops c2l on pop_next, pushes
// l2c on push_next). The unit of the walk is the named buffer's entry (an accumulator vector, an
// input vector, a weight block, a 16-byte micro-op): dram_base, x_size and x_stride count entries.
//   WAIT : range checks (ERR_DRAM_RANGE with that entry size, then ERR_SRAM_RANGE against that
//          buffer's depth)
//   EXEC : walks the on-chip tile in order, row by row: a pad entry is written with zeros in one
//          cycle; at the first data entry of a row it issues the row's read bursts back to back
//          (min(MAX_BURST, beats left in the row, beats to 4 KiB)); an entry is written when its
//          last beat arrives (an entry may span bursts). A burst under way completes after a halt.
// Writes: ACC, INP and UOP entries are assembled from their beats in `vbuf` and written whole;
// only an ACC write takes the accumulator's write port (acc_we = acc_buffer's wr_busy), so a
// LOAD into INP, WGT or UOP never makes COMPUTE wait. A weight block (wider than anything else)
// is not assembled: wgt_buffer keeps one bank per beat, and each beat is written into its bank
// as it arrives (a pad entry zeroes every bank). wgt_set / uop_we mark the entry loaded
// (valid_bits) when its last beat (or its padding) is written.
`include "accel_params.vh"

module load_unit (
    input  wire                            clk,
    input  wire                            rst,
    input  wire                            clr,
    input  wire                            halt,
    // load queue
    input  wire                            q_empty,
    input  wire [`INSN_BITS+31:0]          q_dout,
    output wire                            q_pop,
    // tokens
    input  wire                            c2l_avail,
    output wire                            c2l_pop,
    input  wire                            l2c_full,
    output wire                            l2c_push,
    // DRAM regions
    input  wire [`CFG_MAX_REGIONS*32-1:0]  rbase,
    input  wire [`CFG_MAX_REGIONS*32-1:0]  rsize,
    input  wire [`CFG_MAX_REGIONS*2-1:0]   rattr,
    // DRAM port
    output wire                            req,
    output wire [31:0]                     req_addr,
    output wire [8:0]                      req_len,
    input  wire                            gnt,
    input  wire                            rd_beat,
    input  wire [`CFG_BUS_WIDTH-1:0]       rd_data,
    input  wire                            burst_done,
    // buffer writes: accumulator (its write port: LOAD has priority), input, weight (per beat), micro-op
    output wire                            acc_we,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_addr,
    output wire [`CFG_ACC_VEC_BITS-1:0]    acc_wdata,
    output wire                            inp_we,
    output wire [`CFG_INP_IDX_BITS-1:0]    inp_addr,
    output wire [`CFG_INP_VEC_BITS-1:0]    inp_wdata,
    output wire                            wgt_we,     // a beat of a weight block, or a pad block
    output wire                            wgt_zero,   // a pad block: every bank written with zeros
    output wire [15:0]                     wgt_bank,   // the beat (bank) written
    output wire [`CFG_WGT_IDX_BITS-1:0]    wgt_addr,
    output wire [`CFG_BUS_WIDTH-1:0]       wgt_wdata,
    output wire                            wgt_set,    // the weight block is complete: mark it loaded
    output wire                            uop_we,     // also marks the micro-op loaded
    output wire [`CFG_UOP_IDX_BITS-1:0]    uop_addr,
    output wire [`CFG_UOP_BITS-1:0]        uop_wdata,
    // status
    output wire                            err,
    output wire [7:0]                      err_code,
    output wire [31:0]                     pc_out,     // pc held, all ones when none
    output wire                            idle,       // U_IDLE
    output wire                            exec,       // U_EXEC
    output wire                            stall,      // blocked on a token this cycle
    output wire                            stuck,      // cannot progress (idle+empty or blocked)
    output wire                            insn_done   // an instruction completed
);
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam BUS = `CFG_BUS_WIDTH;
    localparam VB  = `CFG_ACC_VEC_BITS;
    localparam IVB = `CFG_INP_VEC_BITS;
    localparam UEB = `CFG_UOP_ELEM_BYTES * 8;           // a micro-op's DRAM entry (its low bits are kept)
    localparam AB0 = (VB > IVB) ? VB : IVB;
    localparam AB  = (AB0 > UEB) ? AB0 : UEB;           // the widest entry assembled in vbuf
    localparam IX0 = (`CFG_ACC_IDX_BITS > `CFG_INP_IDX_BITS) ? `CFG_ACC_IDX_BITS : `CFG_INP_IDX_BITS;
    localparam IX1 = (`CFG_WGT_IDX_BITS > `CFG_UOP_IDX_BITS) ? `CFG_WGT_IDX_BITS : `CFG_UOP_IDX_BITS;
    localparam IX  = (IX0 > IX1) ? IX0 : IX1;           // index of any buffer's entry
    localparam BL  = `CFG_BUS_BYTES_LOG2;

    wire [`INSN_BITS-1:0] insn;
    wire                  start;
    wire                  exec_done;
    wire                  exec_stop;

    // ---- instruction fields
    wire [`F_MEM_SRAM_BASE_W-1:0]  sram_base = insn[`F_MEM_SRAM_BASE_LO +: `F_MEM_SRAM_BASE_W];
    wire [`F_MEM_DRAM_BASE_W-1:0]  dram_base = insn[`F_MEM_DRAM_BASE_LO +: `F_MEM_DRAM_BASE_W];
    wire [`F_MEM_Y_SIZE_W-1:0]     y_size    = insn[`F_MEM_Y_SIZE_LO +: `F_MEM_Y_SIZE_W];
    wire [`F_MEM_X_SIZE_W-1:0]     x_size    = insn[`F_MEM_X_SIZE_LO +: `F_MEM_X_SIZE_W];
    wire [`F_MEM_X_STRIDE_W-1:0]   x_stride  = insn[`F_MEM_X_STRIDE_LO +: `F_MEM_X_STRIDE_W];
    wire [`F_MEM_Y_PAD_0_W-1:0]    y_pad_0   = insn[`F_MEM_Y_PAD_0_LO +: `F_MEM_Y_PAD_0_W];
    wire [`F_MEM_Y_PAD_1_W-1:0]    y_pad_1   = insn[`F_MEM_Y_PAD_1_LO +: `F_MEM_Y_PAD_1_W];
    wire [`F_MEM_X_PAD_0_W-1:0]    x_pad_0   = insn[`F_MEM_X_PAD_0_LO +: `F_MEM_X_PAD_0_W];
    wire [`F_MEM_X_PAD_1_W-1:0]    x_pad_1   = insn[`F_MEM_X_PAD_1_LO +: `F_MEM_X_PAD_1_W];

    // ---- the named buffer: its entry's DRAM bytes (log2), beats per entry (log2), depth
    wire [`F_MEM_BUF_W-1:0] buf_id = insn[`F_MEM_BUF_LO +: `F_MEM_BUF_W];
    wire        to_acc = (buf_id == `BUF_ACC);
    wire        to_inp = (buf_id == `BUF_INP);
    wire        to_wgt = (buf_id == `BUF_WGT);
    wire        to_uop = (buf_id == `BUF_UOP);
    localparam [4:0]  EL_ACC = `CFG_ACC_VEC_BYTES_LOG2, EL_INP = `CFG_INP_ELEM_BYTES_LOG2,
                      EL_WGT = `CFG_WGT_ELEM_BYTES_LOG2, EL_UOP = `CFG_UOP_ELEM_BYTES_LOG2;
    localparam [34:0] D_ACC = `CFG_ACC_DEPTH, D_INP = `CFG_INP_DEPTH, D_WGT = `CFG_WGT_DEPTH,
                      D_UOP = `CFG_UOP_DEPTH;
    function [4:0] elog2_of;  // the DRAM bytes (log2) of an entry of buffer b
        input [`F_MEM_BUF_W-1:0] b;
        case (b)
            `BUF_ACC: elog2_of = EL_ACC;
            `BUF_INP: elog2_of = EL_INP;
            `BUF_WGT: elog2_of = EL_WGT;
            default:  elog2_of = EL_UOP;
        endcase
    endfunction
    function [34:0] depth_of;  // the entries of buffer b
        input [`F_MEM_BUF_W-1:0] b;
        case (b)
            `BUF_ACC: depth_of = D_ACC;
            `BUF_INP: depth_of = D_INP;
            `BUF_WGT: depth_of = D_WGT;
            default:  depth_of = D_UOP;
        endcase
    endfunction
    wire [4:0]  elog2 = elog2_of(buf_id);
    localparam [4:0] BL5 = BL;
    wire [4:0]  blog2 = elog2 - BL5;  // entries are whole beats (a config rule)

    // ---- range checks. What they compute from the instruction alone (the span and tile products
    // and the sums after them) is computed from the queue's head in the IDLE cycle that pops it,
    // into registers loaded at the edge at which unit_shell loads `insn`: they always hold these
    // functions of `insn`, so WAIT's checks and EXEC's tile_empty start from registers (timing).
    function [63:0] dram_hi_of;  // the end of the DRAM bytes read (exclusive)
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [33:0]           span;
        reg   [4:0]            el;
        begin
            span = {18'd0, w[`F_MEM_Y_SIZE_LO +: 16] - 16'd1} * {18'd0, w[`F_MEM_X_STRIDE_LO +: 16]}
                 + {18'd0, w[`F_MEM_X_SIZE_LO +: 16]};
            el   = elog2_of(w[`F_MEM_BUF_LO +: `F_MEM_BUF_W]);
            dram_hi_of = ({32'd0, w[`F_MEM_DRAM_BASE_LO +: 32]} << el) + ({30'd0, span} << el);
        end
    endfunction
    function [33:0] tile_of;  // the entries written: (pads + rows) * (pads + columns)
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [16:0]           nr;
        reg   [16:0]           nc;
        begin
            nr = {13'd0, w[`F_MEM_Y_PAD_0_LO +: 4]} + {1'b0, w[`F_MEM_Y_SIZE_LO +: 16]}
               + {13'd0, w[`F_MEM_Y_PAD_1_LO +: 4]};
            nc = {13'd0, w[`F_MEM_X_PAD_0_LO +: 4]} + {1'b0, w[`F_MEM_X_SIZE_LO +: 16]}
               + {13'd0, w[`F_MEM_X_PAD_1_LO +: 4]};
            tile_of = {17'd0, nr} * {17'd0, nc};
        end
    endfunction
    function sram_bad_of;  // the tile does not fit in the buffer from sram_base
        /* verilator lint_off UNUSEDSIGNAL */
        input [`INSN_BITS-1:0] w;  // an instruction: the fields named here are used
        /* verilator lint_on UNUSEDSIGNAL */
        reg   [33:0]           t;
        begin
            t = tile_of(w);
            sram_bad_of = (t != 34'd0) && ({{(35-SIB){1'b0}}, w[`F_MEM_SRAM_BASE_LO +: SIB]} + {1'b0, t}
                                           > depth_of(w[`F_MEM_BUF_LO +: `F_MEM_BUF_W]));
        end
    endfunction
    wire [`INSN_BITS-1:0] q_insn = q_dout[`INSN_BITS-1:0];
    reg  [63:0] dram_hi;
    reg         tile_empty;
    reg         sram_bad;
    always @(posedge clk) begin
        if (rst || clr) begin  // the values of insn's reset value (all zeros)
            dram_hi    <= dram_hi_of({`INSN_BITS{1'b0}});
            tile_empty <= (tile_of({`INSN_BITS{1'b0}}) == 34'd0);
            sram_bad   <= sram_bad_of({`INSN_BITS{1'b0}});
        end else if (q_pop) begin
            dram_hi    <= dram_hi_of(q_insn);
            tile_empty <= (tile_of(q_insn) == 34'd0);
            sram_bad   <= sram_bad_of(q_insn);
        end
    end
    wire        has_data = (y_size != 16'd0) && (x_size != 16'd0);
    wire [63:0] dram_lo  = {32'd0, dram_base} << elog2;
    wire        dram_ok;
    region_check u_rc (.lo(dram_lo), .hi(dram_hi), .need_write(1'b0), .rbase(rbase), .rsize(rsize),
                       .rattr(rattr), .ok(dram_ok));
    wire [16:0] rows     = {13'd0, y_pad_0} + {1'b0, y_size} + {13'd0, y_pad_1};
    wire [16:0] cols     = {13'd0, x_pad_0} + {1'b0, x_size} + {13'd0, x_pad_1};
    wire        dram_bad = has_data && !dram_ok;
    wire        range_bad = dram_bad || sram_bad;

    assign err_code = dram_bad ? `ERR_DRAM_RANGE : `ERR_SRAM_RANGE;

    // prev-stage tokens: none (a LOAD with pop_prev / push_prev is rejected at dispatch)
    wire no_prev_pop, no_prev_push;
    unit_shell #(.HAS_PREV(0), .HAS_NEXT(1)) u_shell (
        .clk(clk), .rst(rst), .clr(clr), .halt(halt),
        .q_empty(q_empty), .q_dout(q_dout), .q_pop(q_pop),
        .prev_avail(1'b0), .prev_pop(no_prev_pop), .prev_full(1'b0), .prev_push(no_prev_push),
        .next_avail(c2l_avail), .next_pop(c2l_pop), .next_full(l2c_full), .next_push(l2c_push),
        .insn(insn), .start(start), .range_bad(range_bad), .exec_done(exec_done), .exec_stop(exec_stop),
        .exec_stuck(1'b0),
        .err(err), .pc_out(pc_out), .idle(idle), .exec(exec), .stall(stall), .stuck(stuck),
        .insn_done(insn_done)
    );

    // ---- EXEC walk
    reg [16:0]          r;               // tile row
    reg [16:0]          c;               // tile column
    reg [IX-1:0]        a;               // buffer index of the next entry
    reg [31:0]          row_addr;        // DRAM byte address of the current data row
    reg [31:0]          cur_addr;        // DRAM byte address of the next burst
    reg [31:0]          row_beats;       // beats left in the current data row
    reg                 in_burst;
    reg [8:0]           blen;            // beats of the burst in flight
    reg [15:0]          vbeat;           // beat within the entry being read
    reg [AB-1:0]        vbuf;            // the entry's beats so far (in its top bits)

    wire [31:0] x_beats      = {16'd0, x_size} << blog2;
    wire [31:0] stride_bytes = {16'd0, x_stride} << elog2;
    wire [15:0] last_beat    = (16'd1 << blog2) - 16'd1;
    wire [31:0] base_ext     = {{(32-SIB){1'b0}}, sram_base};
    wire [16:0] data_r0      = {13'd0, y_pad_0};
    wire [16:0] data_r1      = {13'd0, y_pad_0} + {1'b0, y_size};
    wire        at_data      = (x_size != 16'd0) && (r >= data_r0) && (r < data_r1) &&
                               (c == {13'd0, x_pad_0});
    wire        pad_step     = exec && !in_burst && !halt && !tile_empty && !at_data;
    wire        row_end      = in_burst && burst_done && ({23'd0, blen} == row_beats);
    // position after a pad vector or after a row's data
    wire [16:0] c_adv   = row_end ? ({13'd0, x_pad_0} + {1'b0, x_size}) : (c + 17'd1);
    wire        wrap    = (c_adv == cols);
    wire [16:0] r_new   = wrap ? r + 17'd1 : r;
    wire [16:0] c_new   = wrap ? 17'd0 : c_adv;
    wire        fin     = wrap && (r + 17'd1 == rows);
    // EXEC ends with the last data row's last burst, the last pad vector, or at once (empty
    // tile); a halt stops it between bursts
    assign exec_done = (row_end && fin) || (!in_burst && !halt && (tile_empty || (!at_data && fin)));
    assign exec_stop = !in_burst && halt;

    burst_calc u_len (.page_off(cur_addr[11:0]), .beats_left(row_beats), .len(req_len));
    assign req      = exec && !in_burst && !halt && !tile_empty && at_data;
    assign req_addr = cur_addr;

    wire [AB+BUS-1:0] cat = {rd_data, vbuf};
    wire [AB-1:0]     vbuf_next = cat[AB+BUS-1:BUS];
    wire              vec_done  = rd_beat && (vbeat == last_beat);
    wire              wr        = pad_step || (in_burst && vec_done);  // an entry is complete

    // an entry of E bits is the top E bits of vbuf_next (its last beat highest); a pad entry is zeros
    assign acc_we    = to_acc && wr;
    assign acc_addr  = a[`CFG_ACC_IDX_BITS-1:0];
    assign acc_wdata = pad_step ? {VB{1'b0}} : vbuf_next[AB-1 -: VB];
    assign inp_we    = to_inp && wr;
    assign inp_addr  = a[`CFG_INP_IDX_BITS-1:0];
    assign inp_wdata = pad_step ? {IVB{1'b0}} : vbuf_next[AB-1 -: IVB];
    assign uop_we    = to_uop && wr;
    assign uop_addr  = a[`CFG_UOP_IDX_BITS-1:0];
    assign uop_wdata = pad_step ? {`CFG_UOP_BITS{1'b0}} : vbuf_next[AB-UEB +: `CFG_UOP_BITS];
    assign wgt_we    = to_wgt && (pad_step || (in_burst && rd_beat));
    assign wgt_zero  = pad_step;
    assign wgt_bank  = vbeat;
    assign wgt_addr  = a[`CFG_WGT_IDX_BITS-1:0];
    assign wgt_wdata = rd_data;
    assign wgt_set   = to_wgt && wr;

    always @(posedge clk) begin
        if (rst || clr) begin
            r         <= 17'd0;
            c         <= 17'd0;
            a         <= {IX{1'b0}};
            row_addr  <= 32'd0;
            cur_addr  <= 32'd0;
            row_beats <= 32'd0;
            in_burst  <= 1'b0;
            blen      <= 9'd0;
            vbeat     <= 16'd0;
            vbuf      <= {AB{1'b0}};
        end else if (start) begin
            r         <= 17'd0;
            c         <= 17'd0;
            a         <= base_ext[IX-1:0];
            row_addr  <= dram_lo[31:0];
            cur_addr  <= dram_lo[31:0];
            row_beats <= x_beats;
            in_burst  <= 1'b0;
            vbeat     <= 16'd0;
        end else if (exec) begin
            if (in_burst) begin
                if (rd_beat) begin
                    vbuf  <= vbuf_next;
                    vbeat <= vec_done ? 16'd0 : vbeat + 16'd1;
                end
                if (vec_done)
                    a <= a + 1'b1;
                if (burst_done) begin
                    in_burst <= 1'b0;
                    if (row_end) begin
                        row_addr  <= row_addr + stride_bytes;
                        cur_addr  <= row_addr + stride_bytes;
                        row_beats <= x_beats;
                        r         <= r_new;
                        c         <= c_new;
                    end else begin
                        cur_addr  <= cur_addr + ({23'd0, blen} << `CFG_BUS_BYTES_LOG2);
                        row_beats <= row_beats - {23'd0, blen};
                    end
                end
            end else if (!halt && !tile_empty) begin
                if (at_data) begin
                    if (gnt) begin
                        in_burst <= 1'b1;
                        blen     <= req_len;
                    end
                end else begin
                    // pad vector written this cycle
                    a <= a + 1'b1;
                    r <= r_new;
                    c <= c_new;
                end
            end
        end
    end

    // opcode and token flags (the shell's), reserved bits; the oldest beat shifted out of vbuf
    wire unused_load = ^{insn[`F_HDR_PUSH_NEXT_LO:0], no_prev_pop, no_prev_push,
                         insn[`INSN_BITS-1:`MEM_USED_BITS], dram_lo[63:32], cat[BUS-1:0], base_ext[31:SIB]};
    // The walk's arithmetic is written for these field widths: 16-bit sizes and stride
    // ({18'd0, y_size - 16'd1} into the 34-bit span, the 17-bit rows, cols, r and c, the 34-bit
    // tile), 4-bit pads ({13'd0, y_pad_0}), a 32-bit DRAM base and an SRAM base of SIB bits.
    // Verilog-2005 has no static assertion, so a header with other widths instantiates a module
    // that does not exist: elaboration fails (Verilator, Icarus) instead of computing garbage.
    generate
        if (`F_MEM_Y_SIZE_W != 16 || `F_MEM_X_SIZE_W != 16 || `F_MEM_X_STRIDE_W != 16 ||
            `F_MEM_Y_PAD_0_W != 4 || `F_MEM_Y_PAD_1_W != 4 || `F_MEM_X_PAD_0_W != 4 ||
            `F_MEM_X_PAD_1_W != 4 || `F_MEM_DRAM_BASE_W != 32 || `F_MEM_SRAM_BASE_W != SIB ||
            `F_MEM_BUF_W != 2) begin : width_guard
            load_unit_field_widths_differ_from_its_arithmetic u_width_guard ();
        end
    endgenerate
endmodule
