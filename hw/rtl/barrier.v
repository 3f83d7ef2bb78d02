// barrier: where the cores meet. A core is `arrived` while its compute unit holds a BARRIER
// with its loads and stores drained; `bar_go` (every core arrived) ends every core's BARRIER
// in the same cycle. `finished` remembers which cores completed their FINISH since START:
// the run is done when all have. A core waiting at a BARRIER while every other core has
// arrived or finished, at least one finished, can never be released: ERR_BARRIER, on the
// lowest waiting core, at its BARRIER's pc. One core: bar_go = arrived (a BARRIER only drains).
`include "accel_params.vh"

module barrier #(
    parameter N  = 1,  // cores
    parameter CB = 1   // bits of a core index (>= 1)
) (
    input  wire            clk,
    input  wire            rst,
    input  wire            clr,        // START / soft reset
    input  wire [N-1:0]    arrived,
    input  wire [N-1:0]    finish,     // pulse: the core's FINISH completed
    input  wire [N*32-1:0] pc,         // each core's compute pc (its BARRIER's while arrived)
    output wire            bar_go,
    output wire            all_finish, // every core has finished, the last one this cycle
    output wire            err,
    output reg  [CB-1:0]   err_core,
    output reg  [31:0]     err_pc
);
    reg [N-1:0] finished;

    always @(posedge clk) begin
        if (rst || clr)
            finished <= {N{1'b0}};
        else
            finished <= finished | finish;
    end

    assign bar_go    = &arrived;
    assign all_finish = &(finished | finish);
    assign err        = (|arrived) && (&(arrived | finished)) && (|finished);

    integer k;
    always @(*) begin  // the lowest arrived core
        err_core = {CB{1'b0}};
        err_pc   = 32'd0;
        for (k = N - 1; k >= 0; k = k - 1)
            if (arrived[k]) begin
                err_core = k[CB-1:0];
                err_pc   = pc[k*32 +: 32];
            end
    end
endmodule
