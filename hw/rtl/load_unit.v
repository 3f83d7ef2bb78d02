// load_unit: executes LOAD (DRAM -> accumulator buffer, 2-D with stride and zero padding)
// inside unit_shell (IDLE -> WAIT -> EXEC -> PUSH; it pops c2l on pop_next, pushes l2c on push_next).
//   WAIT : range checks (ERR_DRAM_RANGE, then ERR_SRAM_RANGE)
//   EXEC : walks the on-chip tile in order, row by row: a pad vector is written with zeros
//          in one cycle; at the first data vector of a row it issues the row's read bursts
//          back to back (min(MAX_BURST, beats left in the row, beats to 4 KiB)); each vector
//          is written when its last beat arrives. A burst under way completes after a halt.
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
    // accumulator write port
    output wire                            acc_we,
    output wire [`CFG_ACC_IDX_BITS-1:0]    acc_addr,
    output wire [`CFG_ACC_VEC_BITS-1:0]    acc_wdata,
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
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam BUS = `CFG_BUS_WIDTH;
    localparam VB  = `CFG_ACC_VEC_BITS;
    localparam [34:0] DEPTH = `CFG_ACC_DEPTH;

    wire [`INSN_BITS-1:0] insn;
    wire                  start;
    wire                  exec_done;
    wire                  exec_stop;

    // ---- instruction fields
    wire [SIB-1:0]  sram_base = insn[`F_MEM_SRAM_BASE_LO +: `F_MEM_SRAM_BASE_W];
    wire [31:0]     dram_base = insn[`F_MEM_DRAM_BASE_LO +: `F_MEM_DRAM_BASE_W];
    wire [15:0]     y_size    = insn[`F_MEM_Y_SIZE_LO +: `F_MEM_Y_SIZE_W];
    wire [15:0]     x_size    = insn[`F_MEM_X_SIZE_LO +: `F_MEM_X_SIZE_W];
    wire [15:0]     x_stride  = insn[`F_MEM_X_STRIDE_LO +: `F_MEM_X_STRIDE_W];
    wire [3:0]      y_pad_0   = insn[`F_MEM_Y_PAD_0_LO +: `F_MEM_Y_PAD_0_W];
    wire [3:0]      y_pad_1   = insn[`F_MEM_Y_PAD_1_LO +: `F_MEM_Y_PAD_1_W];
    wire [3:0]      x_pad_0   = insn[`F_MEM_X_PAD_0_LO +: `F_MEM_X_PAD_0_W];
    wire [3:0]      x_pad_1   = insn[`F_MEM_X_PAD_1_LO +: `F_MEM_X_PAD_1_W];

    // ---- range checks
    wire        has_data = (y_size != 16'd0) && (x_size != 16'd0);
    wire [33:0] span     = {18'd0, y_size - 16'd1} * {18'd0, x_stride} + {18'd0, x_size};
    wire [63:0] dram_lo  = {32'd0, dram_base} << `CFG_ACC_VEC_BYTES_LOG2;
    wire [63:0] dram_hi  = dram_lo + ({30'd0, span} << `CFG_ACC_VEC_BYTES_LOG2);
    wire        dram_ok;
    region_check u_rc (.lo(dram_lo), .hi(dram_hi), .need_write(1'b0), .rbase(rbase), .rsize(rsize),
                       .rattr(rattr), .ok(dram_ok));
    wire [16:0] rows     = {13'd0, y_pad_0} + {1'b0, y_size} + {13'd0, y_pad_1};
    wire [16:0] cols     = {13'd0, x_pad_0} + {1'b0, x_size} + {13'd0, x_pad_1};
    wire [33:0] tile     = {17'd0, rows} * {17'd0, cols};
    wire [34:0] sram_end = {{(35-SIB){1'b0}}, sram_base} + {1'b0, tile};
    wire        tile_empty = (tile == 34'd0);
    wire        dram_bad = has_data && !dram_ok;
    wire        sram_bad = !tile_empty && (sram_end > DEPTH);
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
    reg [IDX-1:0]       a;               // accumulator index of the next vector
    reg [31:0]          row_addr;        // DRAM byte address of the current data row
    reg [31:0]          cur_addr;        // DRAM byte address of the next burst
    reg [31:0]          row_beats;       // beats left in the current data row
    reg                 in_burst;
    reg [8:0]           blen;            // beats of the burst in flight
    reg [15:0]          vbeat;           // beat within the vector being assembled
    reg [VB-1:0]        vbuf;

    wire [31:0] x_beats      = {16'd0, x_size} * `CFG_BEATS_PER_ACC_VEC;
    wire [31:0] stride_bytes = {16'd0, x_stride} << `CFG_ACC_VEC_BYTES_LOG2;
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

    wire [VB+BUS-1:0] cat = {rd_data, vbuf};
    wire [VB-1:0]     vbuf_next = cat[VB+BUS-1:BUS];
    wire              vec_done  = rd_beat && (vbeat == `CFG_BEATS_PER_ACC_VEC - 1);

    assign acc_we    = pad_step || (in_burst && vec_done);
    assign acc_addr  = a;
    assign acc_wdata = pad_step ? {VB{1'b0}} : vbuf_next;

    always @(posedge clk) begin
        if (rst || clr) begin
            r         <= 17'd0;
            c         <= 17'd0;
            a         <= {IDX{1'b0}};
            row_addr  <= 32'd0;
            cur_addr  <= 32'd0;
            row_beats <= 32'd0;
            in_burst  <= 1'b0;
            blen      <= 9'd0;
            vbeat     <= 16'd0;
            vbuf      <= {VB{1'b0}};
        end else if (start) begin
            r         <= 17'd0;
            c         <= 17'd0;
            a         <= sram_base[IDX-1:0];
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

    // opcode and token flags (the shell's), buf (ACC) and reserved bits
    wire unused_load = ^{insn[`F_HDR_PUSH_NEXT_LO:0], insn[`F_MEM_BUF_LO +: `F_MEM_BUF_W], no_prev_pop, no_prev_push,
                         insn[`INSN_BITS-1:`MEM_USED_BITS], dram_lo[63:32], cat[BUS-1:0]};
endmodule
