// sram_tdp: true dual-port synchronous SRAM, DEPTH words of WIDTH bits, two read/write
// ports (A and B) on one clock. For buffers whose two users each need to read and
// write (e.g. load and store sharing a bank); maps to one block RAM in true dual-port
// mode (ECP5 DP16KD, Xilinx RAMB18/36 TDP, yosys $mem_v2 on the generic target).
//
// Timing contract, per port P in {a, b}:
// * en_P high at a rising edge: the port works in that cycle; en_P low: nothing
//   happens and rdata_P holds.
// * en_P and we_P: mem[addr_P] takes wdata_P at the edge; rdata_P is UNDEFINED after
//   that edge (a write cycle returns no data).
// * en_P and not we_P: a read, registered: rdata_P shows mem[addr_P] right after the
//   edge (one cycle of latency).
// * collisions, same word at the same edge: a read on one port while the other writes
//   it gives an undefined rdata; two writes leave the word undefined. No block RAM
//   guarantees either, so synthesis is told (no_rw_check) and adds no logic; simulation
//   returns X (Icarus; Verilator is 2-state) so that a unit relying on them fails.
// * no reset. ADDR_BITS is given by the instantiator; DEPTH <= 2**ADDR_BITS.
module sram_tdp #(
    parameter WIDTH     = 32,
    parameter DEPTH     = 64,
    parameter ADDR_BITS = 6
) (
    input  wire                 clk,
    input  wire                 en_a,
    input  wire                 we_a,
    input  wire [ADDR_BITS-1:0] addr_a,
    input  wire [WIDTH-1:0]     wdata_a,
    output reg  [WIDTH-1:0]     rdata_a,
    input  wire                 en_b,
    input  wire                 we_b,
    input  wire [ADDR_BITS-1:0] addr_b,
    input  wire [WIDTH-1:0]     wdata_b,
    output reg  [WIDTH-1:0]     rdata_b
);
    (* no_rw_check *)
    reg [WIDTH-1:0] mem [0:DEPTH-1];

    always @(posedge clk) begin
        if (en_a) begin
            if (we_a)
                mem[addr_a] <= wdata_a;
            rdata_a <= mem[addr_a];
        end
        if (en_b) begin
            if (we_b)
                mem[addr_b] <= wdata_b;
            rdata_b <= mem[addr_b];
        end
`ifndef SYNTHESIS
        // undefined results: see the contract above
        if (en_a && (we_a || (en_b && we_b && addr_b == addr_a)))
            rdata_a <= {WIDTH{1'bx}};
        if (en_b && (we_b || (en_a && we_a && addr_a == addr_b)))
            rdata_b <= {WIDTH{1'bx}};
        if (en_a && we_a && en_b && we_b && addr_a == addr_b)
            mem[addr_a] <= {WIDTH{1'bx}};
`endif
    end
endmodule
