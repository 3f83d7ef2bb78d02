// Raw RTL harness: the accelerator verilated as plain C++, clock in C++, no cocotb, no tracing.
//
// Usage: raw_sim <job.txt> [+plusargs]
//
// The job file (written by testbench/raw/harness.py) has one item per line:
//     dram_in <path>       initial DRAM image (binary from address 0; $readmemh hex for the
//                          Verilog memory variant, which reads it through +DRAM_IN)
//     dram_out <path>      where to write DRAM [0, dump_bytes) (binary; hex for the Verilog variant)
//     dump_bytes <n>
//     limit <n>            cycle limit after START (a watchdog: no irq by then = TIMEOUT)
//     w <addr> <value>     an AXI4-Lite write, in order (the Program's register config)
//     r <name> <addr>      a register read after DONE, reported under <name>
//     p <name> <addr>      a register read after reset, before the writes
//     csr_mode <aw> <w> <b> <split> <except>   the bus pattern of the writes (see csr_write)
//     dram_mode <stall> <resp> <read> <write>  C++ DRAM model only: backpressure and injected
//                          error responses (see struct Dram)
//
// Two memory variants, chosen at build time (testbench/raw/harness.py says which is faster):
//   * without RAW_MEM_VERILOG: top accel_top; the DRAM is a C++ model of testbench/hdl/dram_model.v (the same
//     cycle timing: ARREADY while fewer than RD_QUEUE reads are outstanding, bursts answered in AR
//     order, a burst's first R beat RD_LAT cycles after its AR handshake or right after the previous
//     burst's last beat, one beat per cycle, WREADY with AWVALID while idle, B WR_LAT cycles after the last W),
//     evaluated each cycle with the AXI handshakes in C++.
//   * RAW_MEM_VERILOG: top tb_fast (accel_top + dram_model.v); C++ only toggles the clock and
//     plays AXI4-Lite; DRAM is loaded/dumped with the model's tb_load/tb_dump pulses.
//
// Output: one line `RAW {json}` on stdout with cycles, status, err_pc, the register reads,
// csr_bresp / csr_rresp (the OR of every AXI4-Lite write / read response),
// sim_cycles (clock cycles from START to irq), run_wall_s (register config + run to irq),
// timeout and proto_err.

#include <verilated.h>
#include "Vtop.h"
#if VM_COVERAGE
#include <verilated_cov.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#ifndef RAW_BUS_BYTES
#error "RAW_BUS_BYTES must be defined (-DRAW_BUS_BYTES=...)"
#endif
#ifndef RAW_RD_LAT
#error "RAW_RD_LAT must be defined"
#endif
#ifndef RAW_WR_LAT
#error "RAW_WR_LAT must be defined"
#endif
#ifndef RAW_MEM_BYTES
#error "RAW_MEM_BYTES must be defined"
#endif
#ifndef RAW_MAX_BURST
#error "RAW_MAX_BURST must be defined"
#endif

static const uint32_t BB = RAW_BUS_BYTES;
static Vtop* top = nullptr;
static uint64_t g_cycle = 0;

// Bus-wide signals are IData / QData / VlWide depending on the width: copy bytes through memory
// (Verilator stores every width little-endian, word 0 first).
template <typename T> static inline void put_bytes(T& sig, const uint8_t* src) {
    static_assert(sizeof(T) >= RAW_BUS_BYTES, "bus signal narrower than RAW_BUS_BYTES");
    std::memcpy(static_cast<void*>(&sig), src, BB);
}
template <typename T> static inline void get_bytes(const T& sig, uint8_t* dst) {
    std::memcpy(dst, static_cast<const void*>(&sig), BB);
}
template <typename T> static inline uint64_t as_u64(const T& sig) {
    uint64_t v = 0;
    std::memcpy(&v, static_cast<const void*>(&sig), sizeof(T) < 8 ? sizeof(T) : 8);
    return v;
}

#ifndef RAW_MEM_VERILOG
// ------------------------------------------------------------------ C++ DRAM model
#include "dram_model.h"

static Dram* dram = nullptr;

static inline void drive_dram_regs() {
    top->m_axi_arready = dram->arready();
    top->m_axi_awready = dram->awready();
    top->m_axi_rvalid = dram->rvalid;
    top->m_axi_rlast = dram->rlast;
    top->m_axi_rid = dram->rid;
    top->m_axi_bvalid = dram->bvalid;
    top->m_axi_bid = dram->bid;
    if (dram->lfsr != 0 && !dram->rvalid) {
        // with backpressure, R's payload is junk while RVALID is low (AXI gives it no meaning then):
        // a master that reads it without the handshake shows
        uint8_t junk[RAW_BUS_BYTES];
        for (uint32_t b = 0; b < BB; b++) junk[b] = (uint8_t)(dram->lfsr >> (8 * (b & 3))) ^ (uint8_t)(0x5A + b);
        put_bytes(top->m_axi_rdata, junk);
        top->m_axi_rresp = 2;  // SLVERR
    } else {
        put_bytes(top->m_axi_rdata, dram->rdata);
        top->m_axi_rresp = dram->rresp;
    }
    top->m_axi_bresp = (dram->lfsr != 0 && !dram->bvalid) ? 2 : dram->bresp;  // the same for B
}

// The OR of the AR and AW attributes offered ({LOCK, CACHE, PROT} of each, AR in the low byte):
// they are constants of the design, so a change shows.
static uint32_t g_axi_attrs = 0;
static inline void record_axi_attrs() {
    if (top->m_axi_arvalid)
        g_axi_attrs |= (uint32_t)top->m_axi_arprot | ((uint32_t)top->m_axi_arcache << 3) | ((uint32_t)top->m_axi_arlock << 7);
    if (top->m_axi_awvalid)
        g_axi_attrs |= ((uint32_t)top->m_axi_awprot | ((uint32_t)top->m_axi_awcache << 3) | ((uint32_t)top->m_axi_awlock << 7)) << 8;
}

// One clock cycle. On entry clk is low and the design has settled for this cycle.
static inline void tick() {
    // WREADY is the model's only combinational output (it follows AWVALID while no burst awaits data). The
    // master's outputs are functions of its state (AXI: VALID never waits for READY), so they
    // need no re-evaluation after it changes; Verilator settles inputs before the edge.
    const bool awvalid = top->m_axi_awvalid;
    top->m_axi_wready = dram->wready(awvalid);
    record_axi_attrs();
    if (top->rst) {
        dram->reset();
    } else {
        uint8_t wdata[RAW_BUS_BYTES];
        get_bytes(top->m_axi_wdata, wdata);
        dram->step(top->m_axi_arvalid, top->m_axi_araddr, top->m_axi_arlen, top->m_axi_arsize, top->m_axi_arburst,
                   top->m_axi_arid, top->m_axi_rready, awvalid, top->m_axi_awaddr, top->m_axi_awlen,
                   top->m_axi_awsize, top->m_axi_awburst, top->m_axi_awid, top->m_axi_wvalid, wdata,
                   as_u64(top->m_axi_wstrb), top->m_axi_wlast, top->m_axi_bready);
    }
    top->clk = 1;
    top->eval();
    dram->draw_stalls();
    drive_dram_regs();
    top->clk = 0;
    top->eval();
    g_cycle++;
}
#else
// ------------------------------------------------------------------ Verilog DRAM model (tb_fast)
static inline void tick() {
    top->clk = 1;
    top->eval();
    top->clk = 0;
    top->eval();
    g_cycle++;
}
#endif

static void ticks(int n) {
    for (int i = 0; i < n; i++) tick();
}

// ------------------------------------------------------------------ AXI4-Lite master
static const int CSR_TIMEOUT = 2000;

// The bus pattern of the AXI4-Lite writes (job line `csr_mode AW W B SPLIT EXCEPT`): AW offered AW
// cycles and W offered W cycles into the write (0 0: together), BREADY raised B cycles after BVALID
// (0: held from the start); with SPLIT 1 every write but the one to address EXCEPT (CTRL, whose bits
// act on the write) goes as two writes of the same value with WSTRB 0x3 then 0xC (the register must
// merge the halves), with SPLIT 2 as those two writes outstanding together (csr_write_pair).
static uint32_t g_aw_delay = 0, g_w_delay = 0, g_b_delay = 0, g_split = 0, g_split_except = 0;
static uint32_t g_bresp = 0, g_rresp = 0;  // OR of every BRESP / RRESP the slave answered

static bool csr_write_strb(uint32_t addr, uint32_t value, uint32_t strb) {
    top->s_axil_awaddr = addr;
    top->s_axil_awprot = 0;
    top->s_axil_awvalid = g_aw_delay == 0;
    top->s_axil_wdata = value;
    top->s_axil_wstrb = strb;
    top->s_axil_wvalid = g_w_delay == 0;
    top->s_axil_bready = g_b_delay == 0;
    top->eval();
    bool aw_done = false, w_done = false;
    uint32_t b_wait = 0;
    for (uint32_t n = 0; n < (uint32_t)CSR_TIMEOUT; n++) {
        const bool aw = top->s_axil_awvalid && top->s_axil_awready;
        const bool w = top->s_axil_wvalid && top->s_axil_wready;
        const bool b = top->s_axil_bvalid && top->s_axil_bready;
        if (b) g_bresp |= top->s_axil_bresp;
        if (top->s_axil_bvalid && !top->s_axil_bready) b_wait++;
        tick();
        aw_done = aw_done || aw;
        w_done = w_done || w;
        top->s_axil_awvalid = !aw_done && n + 1 >= g_aw_delay;
        top->s_axil_wvalid = !w_done && n + 1 >= g_w_delay;
        if (b) {
            top->s_axil_bready = 0;
            top->eval();
            return true;
        }
        top->s_axil_bready = g_b_delay == 0 || b_wait >= g_b_delay;
        top->eval();
    }
    return false;
}

// SPLIT 2: the two halves as two writes outstanding at once: the second's W is offered in the cycle
// after the first's W handshake, before the first's AW (when AW comes later) and before its B; the
// slave holds it off (WREADY low) until it has taken the first write. Legal AXI4-Lite that a master
// with a write queue does, and the only pattern that offers a W while the slave still holds one.
static bool csr_write_pair(uint32_t addr, uint32_t value) {
    const uint32_t strb[2] = {0x3, 0xC};
    uint32_t aws = 0, ws = 0, bs = 0, b_wait = 0;
    top->s_axil_awaddr = addr;
    top->s_axil_awprot = 0;
    top->s_axil_awvalid = g_aw_delay == 0;
    top->s_axil_wdata = value;
    top->s_axil_wstrb = strb[0];
    top->s_axil_wvalid = g_w_delay == 0;
    top->s_axil_bready = g_b_delay == 0;
    top->eval();
    for (uint32_t n = 0; n < (uint32_t)CSR_TIMEOUT; n++) {
        const bool aw = top->s_axil_awvalid && top->s_axil_awready;
        const bool w = top->s_axil_wvalid && top->s_axil_wready;
        const bool b = top->s_axil_bvalid && top->s_axil_bready;
        if (b) g_bresp |= top->s_axil_bresp;
        if (top->s_axil_bvalid && !top->s_axil_bready) b_wait++;
        tick();
        aws += aw;
        ws += w;
        bs += b;
        if (bs == 2) {
            top->s_axil_awvalid = 0;
            top->s_axil_wvalid = 0;
            top->s_axil_bready = 0;
            top->eval();
            return true;
        }
        if (b) b_wait = 0;
        top->s_axil_awvalid = aws < 2 && n + 1 >= g_aw_delay;
        top->s_axil_wvalid = ws < 2 && n + 1 >= g_w_delay;
        top->s_axil_wstrb = strb[ws < 2 ? ws : 1];
        top->s_axil_bready = g_b_delay == 0 || b_wait >= g_b_delay;
        top->eval();
    }
    return false;
}

static bool csr_write(uint32_t addr, uint32_t value) {
    if (g_split == 2 && addr != g_split_except)
        return csr_write_pair(addr, value);
    if (g_split != 0 && addr != g_split_except)
        return csr_write_strb(addr, value, 0x3) && csr_write_strb(addr, value, 0xC);
    return csr_write_strb(addr, value, 0xF);
}

static bool csr_read(uint32_t addr, uint32_t* value) {
    top->s_axil_araddr = addr;
    top->s_axil_arprot = 0;
    top->s_axil_arvalid = 1;
    top->s_axil_rready = 1;
    top->eval();
    for (int n = 0; n < CSR_TIMEOUT; n++) {
        const bool ar = top->s_axil_arvalid && top->s_axil_arready;
        const bool r = top->s_axil_rvalid && top->s_axil_rready;
        if (r) { *value = top->s_axil_rdata; g_rresp |= top->s_axil_rresp; }
        tick();
        if (ar) { top->s_axil_arvalid = 0; top->eval(); }
        if (r) {
            top->s_axil_rready = 0;
            top->eval();
            return true;
        }
    }
    return false;
}

// ------------------------------------------------------------------ job file
struct Job {
    std::string dram_in, dram_out;
    uint64_t dump_bytes = 0, limit = 1000000;
    std::vector<std::pair<uint32_t, uint32_t>> writes;
    std::vector<std::pair<std::string, uint32_t>> reads;
    std::vector<std::pair<std::string, uint32_t>> pre_reads;  // "p NAME ADDR": read after reset, before the writes
};

#ifndef RAW_MEM_VERILOG
struct DramMode { uint64_t seed, resp; int64_t err_read, err_write; };
static DramMode dram_mode = {0, 0, -1, -1};
static bool has_dram_mode = false;
#endif

static bool parse_job(const char* path, Job& job) {
    std::ifstream f(path);
    if (!f) return false;
    std::string key;
    while (f >> key) {
        if (key == "dram_in") f >> job.dram_in;
        else if (key == "dram_out") f >> job.dram_out;
        else if (key == "dump_bytes") f >> job.dump_bytes;
        else if (key == "limit") f >> job.limit;
        else if (key == "w") { uint64_t a, v; f >> a >> v; job.writes.push_back({(uint32_t)a, (uint32_t)v}); }
        else if (key == "r") { std::string n; uint64_t a; f >> n >> a; job.reads.push_back({n, (uint32_t)a}); }
        else if (key == "csr_mode") f >> g_aw_delay >> g_w_delay >> g_b_delay >> g_split >> g_split_except;
#ifndef RAW_MEM_VERILOG
        else if (key == "dram_mode") {
            uint64_t seed, resp; int64_t er, ew;
            f >> seed >> resp >> er >> ew;
            dram_mode = {seed, resp, er, ew};
            has_dram_mode = true;
        }
#endif
        else if (key == "p") { std::string n; uint64_t a; f >> n >> a; job.pre_reads.push_back({n, (uint32_t)a}); }
        else { std::fprintf(stderr, "raw: %s: unknown key '%s'\n", path, key.c_str()); return false; }
        if (!f) { std::fprintf(stderr, "raw: %s: malformed line for '%s'\n", path, key.c_str()); return false; }
    }
    return true;
}

static int fail(const char* msg) {
    std::printf("RAW {\"tb_error\": \"%s\"}\n", msg);
    return 3;
}

int main(int argc, char** argv) {
    auto t_proc = std::chrono::steady_clock::now();
    Verilated::commandArgs(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <job.txt> [+plusargs]\n", argv[0]);
        return 2;
    }
    Job job;
    if (!parse_job(argv[1], job)) return fail("cannot read the job file");
    top = new Vtop;
    top->clk = 0;
    top->rst = 1;
#ifndef RAW_MEM_VERILOG
    dram = new Dram;
    {
        std::ifstream in(job.dram_in, std::ios::binary);
        if (!in) return fail("cannot read dram_in");
        std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (buf.size() > dram->mem.size()) return fail("dram_in is larger than the DRAM model");
        std::memcpy(dram->mem.data(), buf.data(), buf.size());
    }
    if (has_dram_mode) {
        dram->lfsr = (uint32_t)dram_mode.seed;
        dram->err_resp = (uint32_t)dram_mode.resp & 3;
        dram->err_read = dram_mode.err_read;
        dram->err_write = dram_mode.err_write;
    }
#else
    top->tb_load = 0; top->tb_dump = 0; top->tb_clear = 0; top->tb_words = 0;
#endif
    top->s_axil_awvalid = 0; top->s_axil_wvalid = 0; top->s_axil_bready = 0;
    top->s_axil_arvalid = 0; top->s_axil_rready = 0;
    top->eval();
#ifndef RAW_MEM_VERILOG
    drive_dram_regs();
    top->eval();
#endif
    ticks(4);
#ifdef RAW_MEM_VERILOG
    top->tb_load = 1; tick(); top->tb_load = 0; tick();
#endif
    top->rst = 0;
    top->eval();
    ticks(2);

    std::vector<std::pair<std::string, uint32_t>> got;
    for (auto& r : job.pre_reads) {
        uint32_t v = 0;
        if (!csr_read(r.second, &v)) return fail("AXI-Lite read got no response");
        got.push_back({r.first, v});
    }
    auto t0 = std::chrono::steady_clock::now();
    for (auto& w : job.writes)
        if (!csr_write(w.first, w.second)) return fail("AXI-Lite write got no response");
    const uint64_t start_cycle = g_cycle;
    const uint64_t stop = g_cycle + job.limit;
    while (!top->irq && g_cycle < stop) tick();
    auto t1 = std::chrono::steady_clock::now();
    const bool timeout = !top->irq;
    const uint64_t sim_cycles = g_cycle - start_cycle;

    for (auto& r : job.reads) {
        uint32_t v = 0;
        if (!csr_read(r.second, &v)) return fail("AXI-Lite read got no response");
        got.push_back({r.first, v});
    }
    bool proto = false;
    uint32_t axi_ids = 0, axi_attrs = 0;
#ifndef RAW_MEM_VERILOG
    proto = dram->proto_err;
    axi_ids = dram->ids;
    axi_attrs = g_axi_attrs;
    if (!job.dram_out.empty()) {
        std::ofstream out(job.dram_out, std::ios::binary);
        const uint64_t n = job.dump_bytes < dram->mem.size() ? job.dump_bytes : dram->mem.size();
        out.write(reinterpret_cast<const char*>(dram->mem.data()), (std::streamsize)n);
    }
#else
    proto = top->proto_err;
    top->tb_words = (uint32_t)((job.dump_bytes + BB - 1) / BB);
    top->tb_dump = 1; tick(); top->tb_dump = 0; tick();
#endif
    auto t_end = std::chrono::steady_clock::now();
    const double run_wall = std::chrono::duration<double>(t1 - t0).count();
    const double proc_wall = std::chrono::duration<double>(t_end - t_proc).count();
    std::printf("RAW {\"timeout\": %s, \"proto_err\": %s, \"sim_cycles\": %llu, \"run_wall_s\": %.9f, "
                "\"process_wall_s\": %.6f, \"csr_bresp\": %u, \"csr_rresp\": %u, \"axi_ids\": %u, \"axi_attrs\": %u, \"regs\": {",
                timeout ? "true" : "false", proto ? "true" : "false", (unsigned long long)sim_cycles, run_wall,
                proc_wall, g_bresp, g_rresp, axi_ids, axi_attrs);
    for (size_t i = 0; i < got.size(); i++)
        std::printf("%s\"%s\": %u", i ? ", " : "", got[i].first.c_str(), got[i].second);
    std::printf("}}\n");
    std::fflush(stdout);
    top->final();
#if VM_COVERAGE
    VerilatedCov::write();  // a coverage build: to +verilator+coverage+file+NAME (default coverage.dat)
#endif
    delete top;
    return 0;
}
