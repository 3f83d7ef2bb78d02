// fetch: reads the instruction stream in bursts and dispatches each instruction, in order,
// to the queue of its unit (LOAD -> load, STORE -> store, ALU/GEMM/FINISH/BARRIER -> compute).
//   F_CHECK  : the cycle after START: instruction window check (ERR_INSN_RANGE, ERR_PC 0)
//   F_REQ    : request min(MAX_BURST, remaining, to 4 KiB) beats; leaves on the grant
//   F_BURST  : beats are assembled into the fetch buffer
//   F_DISP   : from the cycle after the last beat, one instruction per cycle, stalling while
//              the target queue is full; each is checked like Isa.decode_word + Isa.check
//   F_BAR    : a BARRIER was dispatched: nothing more until the compute unit completes it
//              (`bar_done`), then on with the buffer, the next burst or F_DONE
//   F_DONE   : every instruction dispatched (or stopped)
`include "accel_params.vh"

module fetch (
    input  wire                            clk,
    input  wire                            rst,
    input  wire                            clr,
    input  wire                            start,
    input  wire                            halt,
    input  wire [31:0]                     insn_addr_lo,
    input  wire [31:0]                     insn_addr_hi,
    input  wire [31:0]                     insn_count,
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
    // this core's BARRIER completed (its PUSH)
    input  wire                            bar_done,
    // queues
    output wire [`INSN_BITS+31:0]          q_din,     // {pc, insn}
    output wire                            lq_push,
    input  wire                            lq_full,
    output wire                            cq_push,
    input  wire                            cq_full,
    output wire                            sq_push,
    input  wire                            sq_full,
    // status
    output wire                            err,
    output wire [7:0]                      err_code,
    output wire [31:0]                     err_pc,
    output wire [31:0]                     burst_pc,  // pc of the first instruction of the burst
    output wire                            stuck      // finished, or stalled on a full queue
);
    localparam [2:0] F_IDLE = 3'd0, F_CHECK = 3'd1, F_REQ = 3'd2, F_BURST = 3'd3,
                     F_DISP = 3'd4, F_DONE = 3'd5, F_BAR = 3'd6;
    localparam BI = `CFG_MAX_BURST_LOG2;          // fetch buffer index bits
    localparam FB = 1 << `CFG_MAX_BURST_LOG2;     // fetch buffer entries (>= MAX_BURST/BEATS_PER_INSN)
    localparam BUS = `CFG_BUS_WIDTH;

    reg [2:0]   state;
    reg [31:0]  addr;      // byte address of the next instruction to fetch
    reg [31:0]  fetched;   // instructions fetched so far
    reg [31:0]  pc;        // next instruction to dispatch
    reg [BI:0]  widx;      // instructions in the buffer
    reg [BI:0]  ridx;      // next instruction to dispatch from the buffer
    reg [2:0]   bcnt;      // beat within the instruction being assembled
    reg [`INSN_BITS-1:0] ibuf;
    reg [`INSN_BITS-1:0] fbuf [0:FB-1];

    // ---- start check: the window [addr, addr + 16*count) inside one readable region
    wire [63:0] win_lo = {32'd0, insn_addr_lo};
    wire [63:0] win_hi = {32'd0, insn_addr_lo} + {28'd0, insn_count, 4'd0};
    wire        win_ok;
    region_check u_win (.lo(win_lo), .hi(win_hi), .need_write(1'b0), .rbase(rbase), .rsize(rsize),
                        .rattr(rattr), .ok(win_ok));
    wire start_bad = (insn_addr_hi != 32'd0) || (insn_count == 32'd0) || (insn_addr_lo[3:0] != 4'd0) || !win_ok;

    // ---- burst request
    wire [31:0] remaining = insn_count - fetched;
    wire [31:0] beats_left = remaining * `CFG_BEATS_PER_INSN;
    burst_calc u_len (.page_off(addr[11:0]), .beats_left(beats_left), .len(req_len));
    assign req      = (state == F_REQ) && !halt;
    assign req_addr = addr;
    assign burst_pc = pc;

    // ---- beat assembly (beat k of an instruction holds its bytes [k*BUS_BYTES, (k+1)*BUS_BYTES))
    wire [`INSN_BITS+BUS-1:0] cat = {rd_data, ibuf};
    wire [`INSN_BITS-1:0] ibuf_next = cat[`INSN_BITS+BUS-1:BUS];
    wire insn_complete = rd_beat && (bcnt == `CFG_BEATS_PER_INSN - 1);

    // ---- dispatch decode (order of checks as Isa.decode_word then Isa.check)
    wire [`INSN_BITS-1:0] head = fbuf[ridx[BI-1:0]];
    wire [2:0] op       = head[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W];
    wire       pop_prev  = head[`F_HDR_POP_PREV_LO];
    wire       pop_next  = head[`F_HDR_POP_NEXT_LO];
    wire       push_prev = head[`F_HDR_PUSH_PREV_LO];
    wire       push_next = head[`F_HDR_PUSH_NEXT_LO];
    wire [1:0] buf_f    = head[`F_MEM_BUF_LO +: `F_MEM_BUF_W];
    wire [3:0] alu_op   = head[`F_ALU_ALU_OP_LO +: `F_ALU_ALU_OP_W];
    wire       pads_nz  = (head[`F_MEM_Y_PAD_0_LO +: `F_MEM_Y_PAD_0_W] != 0) ||
                          (head[`F_MEM_Y_PAD_1_LO +: `F_MEM_Y_PAD_1_W] != 0) ||
                          (head[`F_MEM_X_PAD_0_LO +: `F_MEM_X_PAD_0_W] != 0) ||
                          (head[`F_MEM_X_PAD_1_LO +: `F_MEM_X_PAD_1_W] != 0);
    wire is_load   = (op == `OP_LOAD);
    wire is_store  = (op == `OP_STORE);
    wire is_gemm   = (op == `OP_GEMM);
    wire is_finish = (op == `OP_FINISH);
    wire is_alu    = (op == `OP_ALU);
    wire is_bar    = (op == `OP_BARRIER);
    wire resv_nz   = ((is_load || is_store) && (head[`INSN_BITS-1:`MEM_USED_BITS] != 0)) ||
                     (is_alu    && (head[`INSN_BITS-1:`ALU_USED_BITS] != 0)) ||
                     (is_gemm   && (head[`INSN_BITS-1:`GEMM_USED_BITS] != 0)) ||
                     ((is_finish || is_bar) && (head[`INSN_BITS-1:`HDR_USED_BITS] != 0));
    reg [7:0] dec_code;
    always @(*) begin
        if (!(is_load || is_store || is_gemm || is_finish || is_alu || is_bar)) dec_code = `ERR_BAD_OPCODE;
        else if (resv_nz)                                                  dec_code = `ERR_BAD_OPCODE;
        else if (is_load && (pop_prev || push_prev))                       dec_code = `ERR_BAD_FIELD;
        else if (is_store && (pop_next || push_next))                      dec_code = `ERR_BAD_FIELD;
        else if (is_store && (buf_f != `BUF_ACC))                          dec_code = `ERR_BAD_FIELD;
        else if (is_store && pads_nz)                                      dec_code = `ERR_BAD_FIELD;
        else if (is_alu && (alu_op > `ALU_OP_LAST))                            dec_code = `ERR_BAD_OPCODE;
        else                                                               dec_code = `ERR_NONE;
    end
    wire dec_bad   = (dec_code != `ERR_NONE);
    wire tgt_full  = is_load ? lq_full : (is_store ? sq_full : cq_full);
    wire disp      = (state == F_DISP) && !halt && !dec_bad && !tgt_full;
    wire last_disp = disp && (ridx + 1'b1 == widx);

    assign q_din   = {pc, head};
    assign lq_push = disp && is_load;
    assign sq_push = disp && is_store;
    assign cq_push = disp && !is_load && !is_store;

    wire chk_err  = (state == F_CHECK) && !halt && start_bad;
    wire disp_err = (state == F_DISP) && !halt && dec_bad;
    assign err      = chk_err || disp_err;
    assign err_code = chk_err ? `ERR_INSN_RANGE : dec_code;
    assign err_pc   = chk_err ? 32'd0 : pc;
    assign stuck    = (state == F_IDLE) || (state == F_DONE) || (state == F_BAR) ||
                      ((state == F_DISP) && !dec_bad && tgt_full);

    always @(posedge clk) begin
        if (insn_complete)
            fbuf[widx[BI-1:0]] <= ibuf_next;
    end

    always @(posedge clk) begin
        if (rst) begin
            state   <= F_IDLE;
            addr    <= 32'd0;
            fetched <= 32'd0;
            pc      <= 32'd0;
            widx    <= {(BI+1){1'b0}};
            ridx    <= {(BI+1){1'b0}};
            bcnt    <= 3'd0;
            ibuf    <= {`INSN_BITS{1'b0}};
        end else if (start) begin
            state   <= F_CHECK;
            addr    <= insn_addr_lo;
            fetched <= 32'd0;
            pc      <= 32'd0;
            widx    <= {(BI+1){1'b0}};
            ridx    <= {(BI+1){1'b0}};
            bcnt    <= 3'd0;
        end else if (clr) begin
            state   <= F_IDLE;
        end else begin
            case (state)
                F_CHECK: state <= (halt || start_bad) ? F_DONE : F_REQ;
                F_REQ: begin
                    if (halt)
                        state <= F_DONE;
                    else if (gnt) begin
                        state <= F_BURST;
                        widx  <= {(BI+1){1'b0}};
                        ridx  <= {(BI+1){1'b0}};
                        bcnt  <= 3'd0;
                    end
                end
                F_BURST: begin
                    if (rd_beat) begin
                        ibuf <= ibuf_next;
                        bcnt <= insn_complete ? 3'd0 : bcnt + 3'd1;
                        addr <= addr + `CFG_BUS_BYTES;
                    end
                    if (insn_complete) begin
                        widx    <= widx + 1'b1;
                        fetched <= fetched + 32'd1;
                    end
                    if (burst_done)
                        state <= F_DISP;
                end
                F_DISP: begin
                    if (halt || dec_bad)
                        state <= F_DONE;
                    else if (disp) begin
                        ridx <= ridx + 1'b1;
                        pc   <= pc + 32'd1;
                        if (is_bar)
                            state <= F_BAR;
                        else if (last_disp)
                            state <= (pc + 32'd1 == insn_count) ? F_DONE : F_REQ;
                    end
                end
                F_BAR: begin
                    if (halt)
                        state <= F_DONE;
                    else if (bar_done)
                        state <= (ridx != widx) ? F_DISP : ((pc == insn_count) ? F_DONE : F_REQ);
                end
                default: ;  // F_IDLE, F_DONE: wait for START
            endcase
        end
    end

    wire unused_fetch = ^cat[BUS-1:0];  // the oldest beat, shifted out
endmodule
