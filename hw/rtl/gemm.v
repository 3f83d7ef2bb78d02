// gemm: the GEMM pipeline inside compute_unit's EXEC (docs/microarch.md "GEMM"). One iteration
// (i, j, u) of `for i < iter_out: for j < iter_in: for u in [uop_begin, uop_end)` per cycle in
// steady state, in three stages over synchronous SRAMs:
//   U : the micro-op buffer is read at u (and u's loaded flag sampled); the loop offsets of the
//       iteration (i*factor_out + j*factor_in, for acc, inp and wgt) go along with it;
//   A : a, x, w = the micro-op's fields + the offsets; the checks (in this order: micro-op not
//       loaded -> ERR_UNLOADED; a >= ACC_DEPTH, or without reset x >= INP_DEPTH or
//       w >= WGT_DEPTH -> ERR_SRAM_RANGE; without reset weight block w not loaded ->
//       ERR_UNLOADED): `fault` in this cycle, the error cycle; the accumulator (copy D, not with
//       reset), input and weight buffers are read at a, x, w;
//   E : acc[a][o] + sum_k inp[x][k] * wgt[w][o][k] on the SRAM outputs (int8 x int8, 32-bit wrap),
//       or 0 with reset, written into acc[a] at the end of the cycle (the accumulator's write port).
// The pipeline advances only in a free cycle (`go`: LOAD does not hold the accumulator's write
// port); a frozen cycle does nothing (no read enable, no write), so the SRAM outputs hold.
// Iteration k is in U at free cycle k+1, A at k+2, E at k+3 (free cycles of EXEC counted from 1);
// EXEC ends with free cycle N+2 (`done`), N = iter_out*iter_in*(uop_end-uop_begin) > 0.
// Read-after-write: iteration k+1 reads acc[a] at the edge at which k writes it (distance 1):
// the operand is then the written vector (`fw_data`, compute_unit's register of its last write),
// by a match flag registered at the read; distance >= 2 finds the SRAM written. No cycle is lost.
// Loop offsets saturate at 2**(SRAM_IDX_BITS+1)-1, above every buffer's depth, so an index past a
// buffer is seen as such however far the loop runs, with registers a few bits wide.
`include "accel_params.vh"

module gemm (
    input  wire                              clk,
    input  wire                              rst,
    input  wire                              clr,
    input  wire [`INSN_BITS-1:0]             insn,
    input  wire                              start,      // WAIT -> EXEC of this instruction at this edge
    input  wire                              active,     // EXEC of a GEMM with iterations, not halted
    input  wire                              go,         // a free cycle: the pipeline advances
    output wire                              no_iter,    // N = 0
    output wire                              range_bad,  // WAIT's check: N > 0 and uop_end > UOP_DEPTH
    output wire                              done,       // the last iteration's E: EXEC ends
    output wire                              fault,      // an iteration's A stage faults (error cycle)
    output wire [7:0]                        fault_code,
    output wire                              op,         // a block multiplied and written (GEMM_OPS)
    // micro-op buffer and its loaded flags
    output wire                              uop_re,
    output wire [`CFG_UOP_IDX_BITS-1:0]      uop_raddr,
    input  wire [`CFG_UOP_BITS-1:0]          uop_rdata,
    input  wire                              uop_valid,  // loaded flag of entry uop_raddr
    // input buffer
    output wire                              inp_re,
    output wire [`CFG_INP_IDX_BITS-1:0]      inp_raddr,
    input  wire [`CFG_INP_VEC_BITS-1:0]      inp_rdata,
    // weight buffer and its loaded flags
    output wire                              wgt_re,
    output wire [`CFG_WGT_IDX_BITS-1:0]      wgt_raddr,
    input  wire [`CFG_WGT_BLOCK_BITS-1:0]    wgt_rdata,
    input  wire                              wgt_valid,  // loaded flag of entry wgt_raddr
    // accumulator: copy D read, write port (when free), the last vector compute_unit wrote
    output wire                              acc_re,
    output wire [`CFG_ACC_IDX_BITS-1:0]      acc_raddr,
    input  wire [`CFG_ACC_VEC_BITS-1:0]      acc_rdata,
    input  wire [`CFG_ACC_VEC_BITS-1:0]      fw_data,
    output wire                              acc_we,
    output wire [`CFG_ACC_IDX_BITS-1:0]      acc_waddr,
    output wire [`CFG_ACC_VEC_BITS-1:0]      acc_wdata
);
    localparam SIB  = `CFG_SRAM_IDX_BITS;
    localparam UIB  = `CFG_UOP_IDX_BITS;
    localparam IDX  = `CFG_ACC_IDX_BITS;
    localparam BLK  = `CFG_BLOCK;
    localparam VB   = `CFG_ACC_VEC_BITS;
    localparam UFB  = `CFG_UOP_FIELD_BITS;
    localparam OW   = SIB + 1;                          // a saturating loop offset
    localparam XW   = ((OW > UFB) ? OW : UFB) + 1;      // micro-op field + offset, never wraps
    localparam [XW-1:0] ACC_D = `CFG_ACC_DEPTH;
    localparam [XW-1:0] INP_D = `CFG_INP_DEPTH;
    localparam [XW-1:0] WGT_D = `CFG_WGT_DEPTH;
    localparam [UIB:0]  UOP_D = `CFG_UOP_DEPTH;

    // ---- fields
    wire           reset     = insn[`F_GEMM_RESET_LO];
    wire [UIB-1:0] uop_begin = insn[`F_GEMM_UOP_BEGIN_LO +: `F_GEMM_UOP_BEGIN_W];
    wire [UIB:0]   uop_end   = insn[`F_GEMM_UOP_END_LO +: `F_GEMM_UOP_END_W];
    wire [13:0]    iter_out  = insn[`F_GEMM_ITER_OUT_LO +: `F_GEMM_ITER_OUT_W];
    wire [13:0]    iter_in   = insn[`F_GEMM_ITER_IN_LO +: `F_GEMM_ITER_IN_W];
    wire [SIB-1:0] acc_fo    = insn[`F_GEMM_ACC_FACTOR_OUT_LO +: `F_GEMM_ACC_FACTOR_OUT_W];
    wire [SIB-1:0] acc_fi    = insn[`F_GEMM_ACC_FACTOR_IN_LO +: `F_GEMM_ACC_FACTOR_IN_W];
    wire [SIB-1:0] inp_fo    = insn[`F_GEMM_INP_FACTOR_OUT_LO +: `F_GEMM_INP_FACTOR_OUT_W];
    wire [SIB-1:0] inp_fi    = insn[`F_GEMM_INP_FACTOR_IN_LO +: `F_GEMM_INP_FACTOR_IN_W];
    wire [SIB-1:0] wgt_fo    = insn[`F_GEMM_WGT_FACTOR_OUT_LO +: `F_GEMM_WGT_FACTOR_OUT_W];
    wire [SIB-1:0] wgt_fi    = insn[`F_GEMM_WGT_FACTOR_IN_LO +: `F_GEMM_WGT_FACTOR_IN_W];

    assign no_iter   = (iter_out == 14'd0) || (iter_in == 14'd0) || (uop_end <= {1'b0, uop_begin});
    assign range_bad = !no_iter && (uop_end > UOP_D);

    // offset + factor, saturating at all ones
    function [OW-1:0] sat_add;
        input [OW-1:0]  off;
        input [SIB-1:0] f;
        reg   [OW:0]    s;
        begin
            s = {1'b0, off} + {2'b00, f};
            sat_add = s[OW] ? {OW{1'b1}} : s[OW-1:0];
        end
    endfunction

    // ---- U: the loop (the next iteration to read)
    reg [UIB-1:0] u;
    reg [13:0]    i;
    reg [13:0]    j;
    reg [OW-1:0]  acc_row, acc_cur, inp_row, inp_cur, wgt_row, wgt_cur;
    reg           issued;   // every iteration has been read
    // ---- A: the iteration whose micro-op was read
    reg           a_v;
    reg           a_uop_ok; // its micro-op was loaded
    reg [OW-1:0]  a_acc_off, a_inp_off, a_wgt_off;
    // ---- E: the iteration whose operands were read
    reg           e_v;
    reg [IDX-1:0] e_a;
    reg           e_fwd;    // its acc index is the one written when it was read: use fw_data

    wire adv    = active && go;
    wire rd_uop = adv && !issued;
    wire last_u = ({1'b0, u} + {{UIB{1'b0}}, 1'b1} == uop_end);
    wire last_j = (j + 14'd1 == iter_in);
    wire last_i = (i + 14'd1 == iter_out);

    assign uop_re    = rd_uop;
    assign uop_raddr = u;

    // A: indices and checks
    wire [XW-1:0] a_idx = {{(XW-UFB){1'b0}}, uop_rdata[0 +: UFB]}       + {{(XW-OW){1'b0}}, a_acc_off};
    wire [XW-1:0] x_idx = {{(XW-UFB){1'b0}}, uop_rdata[UFB +: UFB]}     + {{(XW-OW){1'b0}}, a_inp_off};
    wire [XW-1:0] w_idx = {{(XW-UFB){1'b0}}, uop_rdata[2*UFB +: UFB]}   + {{(XW-OW){1'b0}}, a_wgt_off};
    wire out_of_range = (a_idx >= ACC_D) || (!reset && ((x_idx >= INP_D) || (w_idx >= WGT_D)));
    wire wgt_unloaded = !reset && !wgt_valid;
    assign fault      = adv && a_v && (!a_uop_ok || out_of_range || wgt_unloaded);
    assign fault_code = (!a_uop_ok || !out_of_range) ? `ERR_UNLOADED : `ERR_SRAM_RANGE;

    assign acc_re    = adv && a_v && !reset;
    assign acc_raddr = a_idx[IDX-1:0];
    assign inp_re    = adv && a_v && !reset;
    assign inp_raddr = x_idx[`CFG_INP_IDX_BITS-1:0];
    assign wgt_re    = adv && a_v && !reset;
    assign wgt_raddr = w_idx[`CFG_WGT_IDX_BITS-1:0];

    // E: the MACs on the SRAM outputs
    wire [VB-1:0] acc_op = e_fwd ? fw_data : acc_rdata;
    wire [VB-1:0] mac;
    genvar o;
    generate
        for (o = 0; o < BLK; o = o + 1) begin : g_lane
            gemm_lane u_lane (.acc(acc_op[o*32 +: 32]), .x(inp_rdata), .w(wgt_rdata[o*BLK*8 +: BLK*8]),
                              .y(mac[o*32 +: 32]));
        end
    endgenerate

    assign acc_we    = adv && e_v;
    assign acc_waddr = e_a;
    assign acc_wdata = reset ? {VB{1'b0}} : mac;
    assign op        = adv && e_v && !reset;
    assign done      = adv && issued && !a_v && e_v;

    always @(posedge clk) begin
        if (rst || clr) begin
            u        <= {UIB{1'b0}};
            i        <= 14'd0;
            j        <= 14'd0;
            acc_row  <= {OW{1'b0}};
            acc_cur  <= {OW{1'b0}};
            inp_row  <= {OW{1'b0}};
            inp_cur  <= {OW{1'b0}};
            wgt_row  <= {OW{1'b0}};
            wgt_cur  <= {OW{1'b0}};
            issued   <= 1'b0;
            a_v      <= 1'b0;
            a_uop_ok <= 1'b0;
            e_v      <= 1'b0;
            e_a      <= {IDX{1'b0}};
            e_fwd    <= 1'b0;
        end else if (start) begin
            u        <= uop_begin;
            i        <= 14'd0;
            j        <= 14'd0;
            acc_row  <= {OW{1'b0}};
            acc_cur  <= {OW{1'b0}};
            inp_row  <= {OW{1'b0}};
            inp_cur  <= {OW{1'b0}};
            wgt_row  <= {OW{1'b0}};
            wgt_cur  <= {OW{1'b0}};
            issued   <= 1'b0;
            a_v      <= 1'b0;
            e_v      <= 1'b0;
        end else if (adv) begin
            // A -> E
            e_v   <= a_v;
            e_a   <= a_idx[IDX-1:0];
            e_fwd <= a_v && e_v && (a_idx[IDX-1:0] == e_a);
            // U -> A
            a_v <= rd_uop;
            if (rd_uop) begin
                a_uop_ok  <= uop_valid;
                a_acc_off <= acc_cur;
                a_inp_off <= inp_cur;
                a_wgt_off <= wgt_cur;
                issued    <= last_u && last_j && last_i;
                if (!last_u) begin
                    u <= u + 1'b1;
                end else begin
                    u <= uop_begin;
                    if (last_j) begin
                        j       <= 14'd0;
                        i       <= i + 14'd1;
                        acc_row <= sat_add(acc_row, acc_fo);
                        acc_cur <= sat_add(acc_row, acc_fo);
                        inp_row <= sat_add(inp_row, inp_fo);
                        inp_cur <= sat_add(inp_row, inp_fo);
                        wgt_row <= sat_add(wgt_row, wgt_fo);
                        wgt_cur <= sat_add(wgt_row, wgt_fo);
                    end else begin
                        j       <= j + 14'd1;
                        acc_cur <= sat_add(acc_cur, acc_fi);
                        inp_cur <= sat_add(inp_cur, inp_fi);
                        wgt_cur <= sat_add(wgt_cur, wgt_fi);
                    end
                end
            end
        end
    end

    // the header, opcode and reserved bits are compute_unit's; the high index bits only matter
    // to the range check
    wire unused_gemm = ^{insn[`F_GEMM_RESET_LO-1:0], insn[`INSN_BITS-1:`GEMM_USED_BITS],
                         a_idx[XW-1:IDX], x_idx[XW-1:`CFG_INP_IDX_BITS], w_idx[XW-1:`CFG_WGT_IDX_BITS]};
endmodule
