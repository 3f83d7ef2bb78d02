// store_unit: executes STORE (accumulator buffer -> DRAM, each lane narrowed to OUT_WIDTH
// bits as a C cast would, 2-D with stride).
//   U_IDLE : pops the head of the store queue (1 cycle)
//   U_WAIT : range checks (ERR_DRAM_RANGE, then ERR_SRAM_RANGE); waits for the pop_prev
//            token (c2s); takes it and enters EXEC the cycle it is available
//   U_EXEC : for each row, write bursts back to back (min(MAX_BURST, beats left in the
//            row, beats to 4 KiB)); vectors are read and narrowed as W beats need them;
//            a burst ends with its B response
//   U_PUSH : pushes the push_prev token (s2c), waiting while it is full (>= 1 cycle)
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
    // accumulator read port
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
    localparam [1:0] U_IDLE = 2'd0, U_WAIT = 2'd1, U_EXEC = 2'd2, U_PUSH = 2'd3;
    localparam IDX = `CFG_ACC_IDX_BITS;
    localparam SIB = `CFG_SRAM_IDX_BITS;
    localparam BUS = `CFG_BUS_WIDTH;
    localparam OVB = `CFG_OUT_VEC_BITS;
    localparam OW  = `CFG_OUT_WIDTH;
    localparam [33:0] DEPTH = `CFG_ACC_DEPTH;

    reg [1:0]            state;
    reg [`INSN_BITS-1:0] insn;
    reg [31:0]           pc;

    // ---- fields
    wire            pop_prev  = insn[`F_HDR_POP_PREV_LO];
    wire            push_prev = insn[`F_HDR_PUSH_PREV_LO];
    wire [SIB-1:0]  sram_base = insn[`F_MEM_SRAM_BASE_LO +: `F_MEM_SRAM_BASE_W];
    wire [31:0]     dram_base = insn[`F_MEM_DRAM_BASE_LO +: `F_MEM_DRAM_BASE_W];
    wire [15:0]     y_size    = insn[`F_MEM_Y_SIZE_LO +: `F_MEM_Y_SIZE_W];
    wire [15:0]     x_size    = insn[`F_MEM_X_SIZE_LO +: `F_MEM_X_SIZE_W];
    wire [15:0]     x_stride  = insn[`F_MEM_X_STRIDE_LO +: `F_MEM_X_STRIDE_W];

    // ---- range checks
    wire        has_data = (y_size != 16'd0) && (x_size != 16'd0);
    wire [33:0] span     = {18'd0, y_size - 16'd1} * {18'd0, x_stride} + {18'd0, x_size};
    wire [63:0] dram_lo  = {32'd0, dram_base} << `CFG_OUT_VEC_BYTES_LOG2;
    wire [63:0] dram_hi  = dram_lo + ({30'd0, span} << `CFG_OUT_VEC_BYTES_LOG2);
    wire        dram_ok;
    region_check u_rc (.lo(dram_lo), .hi(dram_hi), .need_write(1'b1), .rbase(rbase), .rsize(rsize),
                       .rattr(rattr), .ok(dram_ok));
    wire [31:0] vecs     = {16'd0, y_size} * {16'd0, x_size};
    wire [33:0] sram_end = {{(34-SIB){1'b0}}, sram_base} + {2'd0, vecs};
    wire        dram_bad = has_data && !dram_ok;
    wire        sram_bad = has_data && (sram_end > DEPTH);
    wire        range_bad = dram_bad || sram_bad;

    // ---- tokens
    wire tok_ok       = !pop_prev || c2s_avail;
    wire push_blocked = push_prev && s2c_full;
    wire wait_go      = (state == U_WAIT) && !halt && !range_bad && tok_ok;
    wire push_go      = (state == U_PUSH) && !halt && !push_blocked;

    assign q_pop    = (state == U_IDLE) && !halt && !q_empty;
    assign c2s_pop  = wait_go && pop_prev;
    assign s2c_push = push_go && push_prev;

    assign err       = (state == U_WAIT) && !halt && range_bad;
    assign err_code  = dram_bad ? `ERR_DRAM_RANGE : `ERR_SRAM_RANGE;
    assign pc_out    = (state == U_IDLE) ? 32'hFFFFFFFF : pc;
    assign idle      = (state == U_IDLE);
    assign exec      = (state == U_EXEC);
    assign stall     = ((state == U_WAIT) && !tok_ok) || ((state == U_PUSH) && push_blocked);
    assign stuck     = ((state == U_IDLE) && q_empty) || stall;
    assign insn_done = push_go;

    // ---- EXEC
    reg [15:0]    r;           // data row
    reg [IDX-1:0] a;           // accumulator index of the vector being written
    reg [31:0]    row_addr;
    reg [31:0]    cur_addr;
    reg [31:0]    row_beats;
    reg           in_burst;
    reg [8:0]     blen;
    reg [15:0]    obeat;       // beat within the output vector
    reg [OVB-1:0] oshift;      // remaining beats of the current output vector

    wire [31:0] x_beats      = {16'd0, x_size} * `CFG_BEATS_PER_OUT_VEC;
    wire [31:0] stride_bytes = {16'd0, x_stride} << `CFG_OUT_VEC_BYTES_LOG2;
    wire        row_end      = in_burst && burst_done && ({23'd0, blen} == row_beats);
    wire        fin          = row_end && (r + 16'd1 == y_size);

    // narrowing: each lane keeps its low OUT_WIDTH bits
    wire [OVB-1:0] narrow;
    genvar l;
    generate
        for (l = 0; l < `CFG_LANES; l = l + 1) begin : g_lane
            assign narrow[l*OW +: OW] = acc_rdata[l*32 +: OW];
        end
    endgenerate
    wire [OVB-1:0] narrow_rest = narrow >> BUS;
    wire           first_beat  = (obeat == 16'd0);
    wire           vec_last    = (obeat == `CFG_BEATS_PER_OUT_VEC - 1);

    burst_calc u_len (.page_off(cur_addr[11:0]), .beats_left(row_beats), .len(req_len));
    assign req       = (state == U_EXEC) && !in_burst && !halt && has_data;
    assign req_addr  = cur_addr;
    assign acc_raddr = a;
    assign wr_data   = first_beat ? narrow[BUS-1:0] : oshift[BUS-1:0];

    always @(posedge clk) begin
        if (rst || clr) begin
            state     <= U_IDLE;
            insn      <= {`INSN_BITS{1'b0}};
            pc        <= 32'd0;
            r         <= 16'd0;
            a         <= {IDX{1'b0}};
            row_addr  <= 32'd0;
            cur_addr  <= 32'd0;
            row_beats <= 32'd0;
            in_burst  <= 1'b0;
            blen      <= 9'd0;
            obeat     <= 16'd0;
            oshift    <= {OVB{1'b0}};
        end else begin
            case (state)
                U_IDLE: begin
                    if (q_pop) begin
                        insn  <= q_dout[`INSN_BITS-1:0];
                        pc    <= q_dout[`INSN_BITS+31:`INSN_BITS];
                        state <= U_WAIT;
                    end
                end
                U_WAIT: begin
                    if (halt)
                        state <= U_IDLE;
                    else if (wait_go) begin
                        state     <= U_EXEC;
                        r         <= 16'd0;
                        a         <= sram_base[IDX-1:0];
                        row_addr  <= dram_lo[31:0];
                        cur_addr  <= dram_lo[31:0];
                        row_beats <= x_beats;
                        in_burst  <= 1'b0;
                        obeat     <= 16'd0;
                    end
                end
                U_EXEC: begin
                    if (in_burst) begin
                        if (wr_beat) begin
                            oshift <= first_beat ? narrow_rest : (oshift >> BUS);
                            obeat  <= vec_last ? 16'd0 : obeat + 16'd1;
                            if (vec_last)
                                a <= a + 1'b1;
                        end
                        if (burst_done) begin
                            in_burst <= 1'b0;
                            if (row_end) begin
                                r         <= r + 16'd1;
                                row_addr  <= row_addr + stride_bytes;
                                cur_addr  <= row_addr + stride_bytes;
                                row_beats <= x_beats;
                                if (fin)
                                    state <= U_PUSH;
                            end else begin
                                cur_addr  <= cur_addr + ({23'd0, blen} << `CFG_BUS_BYTES_LOG2);
                                row_beats <= row_beats - {23'd0, blen};
                            end
                        end
                    end else if (halt) begin
                        state <= U_IDLE;
                    end else if (!has_data) begin
                        state <= U_PUSH;
                    end else if (gnt) begin
                        in_burst <= 1'b1;
                        blen     <= req_len;
                    end
                end
                default: begin  // U_PUSH
                    if (halt || push_go)
                        state <= U_IDLE;
                end
            endcase
        end
    end

    // opcode, pop_next/push_next and padding (rejected at dispatch), buf (ACC), reserved bits
    wire unused_store = ^{insn[`F_HDR_POP_NEXT_LO:0], insn[`F_HDR_PUSH_NEXT_LO],
                          insn[`F_MEM_BUF_LO +: `F_MEM_BUF_W], insn[`INSN_BITS-1:`F_MEM_Y_PAD_0_LO],
                          dram_lo[63:32], acc_rdata};
endmodule
