// sram: synchronous SRAM, DEPTH words of WIDTH bits, one write port and one read port
// (simple dual port) on one clock. The building block of every on-chip buffer; it maps
// to block RAM (ECP5 DP16KD/PDPW16KD, Xilinx RAMB18/36 or LUT RAM when small, yosys
// $mem_v2 on the generic target) with no logic around it.
//
// Timing contract:
// * write: when we is high at a rising edge, mem[waddr] takes wdata at that edge.
// * read: when re is high at a rising edge, rdata shows mem[raddr] after that edge
//   (one cycle of latency: registered read). When re is low, rdata holds its value.
// * read-during-write of the SAME word at the same edge: rdata is UNDEFINED. No block
//   RAM between two ports guarantees it, so synthesis is told (no_rw_check) and adds no
//   bypass logic; simulation returns X (Icarus shows X; Verilator, 2-state, a constant),
//   so a unit that relies on it fails its tests. The word is written all the same, and a
//   read of any OTHER word in that cycle returns its stored value. A unit that reads a
//   word it is writing forwards the write data itself.
// * no reset: the contents and rdata start undefined (X in Icarus).
// ADDR_BITS is given by the instantiator (widths come from the generated header, not
// $clog2); DEPTH must not exceed 2**ADDR_BITS, and an address >= DEPTH is not allowed.
module sram #(
    parameter WIDTH     = 32,
    parameter DEPTH     = 64,
    parameter ADDR_BITS = 6
) (
    input  wire                 clk,
    input  wire                 we,
    input  wire [ADDR_BITS-1:0] waddr,
    input  wire [WIDTH-1:0]     wdata,
    input  wire                 re,
    input  wire [ADDR_BITS-1:0] raddr,
    output reg  [WIDTH-1:0]     rdata
);
    (* no_rw_check *)
    reg [WIDTH-1:0] mem [0:DEPTH-1];

    always @(posedge clk) begin
        if (we)
            mem[waddr] <= wdata;
        if (re)
            rdata <= mem[raddr];
`ifndef SYNTHESIS
        if (re && we && raddr == waddr)
            rdata <= {WIDTH{1'bx}};  // undefined: see the contract above
`endif
    end
endmodule
