// cocotb + Verilator main for the fast back-end: cocotb's own main loop (share/lib/verilator/
// verilator.cpp of cocotb 2.1) with the clock toggled here, in C++, and a quiet fast path.
//
// Used by testbench/rtl_model.py instead of cocotb's verilator.cpp for every tb_fast build on
// Verilator, with or without waves, and for protocol-back-end waves builds (compiled with
// -DCOSIM_GPI_CLOCK: no clock here, cocotb's GPI clock drives `clk` as in cocotb's main; only the
// bounded trace window below is wanted there). Differences from cocotb's loop, and why they keep
// its semantics:
//   * The top input `clk` toggles every FAST_HALF_PERIOD_NS (from 0 at time 0, first rising
//     edge at one half period) as if a timed event of the simulator; Python never drives clk.
//     This replaces cocotb's GPI clock (a VPI callback and put per edge) and Verilator
//     --timing (coroutines, C++20, slow builds).
//   * Quiet fast path: after a time step in which no VPI callback ran, Python cannot have
//     registered anything new, so until a value-change callback fires (e.g. irq rising) or
//     the next timed callback is due, each step is just "toggle clk, eval, check value
//     callbacks": every other call of cocotb's loop (ReadWrite/ReadOnly/NextSimTime lists,
//     inertial puts) would be a no-op there. When a value callback fires the step continues
//     exactly as in cocotb's loop.
//   * Waves (a build with --trace, VM_TRACE=1): nothing is traced until the cocotb job asks, through
//     cosim_trace_start() below (called with ctypes: the executable exports it, -rdynamic), and the
//     VCD is then written at every time step until cosim_trace_stop() or the end. So the job traces
//     a window (e.g. the last cycles before a failure) at full speed up to it, and the file never
//     grows past the byte cap it passes: CappedVcdFile drops the write that would cross it.
//   * Coverage (a build with --coverage-*, VM_COVERAGE=1): as cocotb's main, the collected points are
//     written at the end by VerilatedCov::write(), to +verilator+coverage+file+NAME (default coverage.dat).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"
#if VM_COVERAGE
#include "verilated_cov.h"
#endif

#if VM_TRACE
#include "verilated_vcd_c.h"

// A VCD file that never grows past `cap` bytes: the buffer flush that would cross the cap, and every
// later one, is dropped (Verilator flushes whole lines, so the file ends at a line: a well-formed
// VCD cut at some time step).
class CappedVcdFile final : public VerilatedVcdFile {
public:
    uint64_t cap = 0;  // 0: no cap
    uint64_t written = 0;
    bool capped = false;
    ssize_t write(const char* bufp, ssize_t len) override {
        if (capped || (cap && written + static_cast<uint64_t>(len) > cap)) {
            capped = true;
            return len;  // dropped on purpose; Verilator must not see an error
        }
        const ssize_t got = VerilatedVcdFile::write(bufp, len);
        if (got > 0) written += static_cast<uint64_t>(got);
        return got;
    }
};

// The one trace window of this process (Verilator's VCD writer opens once).
struct TraceWindow {
    CappedVcdFile file;
    VerilatedVcdC* vcd = nullptr;  // never deleted, as in cocotb's main (deleting it at exit can deadlock)
    std::string path;
    bool requested = false;  // cosim_trace_start() was called
    bool stop = false;       // cosim_trace_stop() was called
    bool open = false;       // the VCD is being written
    bool closed = false;     // written and closed
    vluint64_t first = 0, last = 0;  // times of the first and last dump
};
static TraceWindow g_trace;

extern "C" {
// Start writing the VCD `path` from the next time step on, at most `max_bytes` bytes (0: no cap).
// Returns 0, or -1 when this process's trace window was already started.
__attribute__((visibility("default"))) int cosim_trace_start(const char* path, unsigned long long max_bytes) {
    if (g_trace.requested) return -1;
    g_trace.requested = true;
    g_trace.path = path;
    g_trace.file.cap = max_bytes;
    return 0;
}
// Stop writing: the VCD is closed at the next time step.
__attribute__((visibility("default"))) void cosim_trace_stop(void) { g_trace.stop = true; }
// What was written: times of the first and last dump, bytes, and whether the cap cut the file.
// Returns whether anything was written.
__attribute__((visibility("default"))) int cosim_trace_info(unsigned long long* first, unsigned long long* last,
                                                            unsigned long long* bytes, int* capped) {
    *first = g_trace.first;
    *last = g_trace.last;
    *bytes = g_trace.file.written;
    *capped = g_trace.file.capped ? 1 : 0;
    return (g_trace.open || g_trace.closed) ? 1 : 0;
}
}

static void trace_close() {
    if (g_trace.open) {
        g_trace.vcd->close();
        g_trace.open = false;
        g_trace.closed = true;
    }
}

// After every time step: open, dump or close the window as the job asked.
static inline void trace_step(vluint64_t t) {
    if (VL_LIKELY(!g_trace.requested || g_trace.closed)) return;
    if (!g_trace.open) {
        if (g_trace.stop) {  // stopped before it began: nothing to write
            g_trace.closed = true;
            return;
        }
        g_trace.vcd->open(g_trace.path.c_str());
        if (!g_trace.vcd->isOpen()) {
            std::fprintf(stderr, "cosim: cannot open the VCD %s\n", g_trace.path.c_str());
            g_trace.closed = true;
            return;
        }
        g_trace.open = true;
        g_trace.first = t;
    }
    g_trace.vcd->dump(t);
    g_trace.last = t;
    if (g_trace.stop || g_trace.file.capped) trace_close();
}
#else
static inline void trace_step(vluint64_t) {}
static void trace_close() {}
#endif

#ifndef FAST_HALF_PERIOD_NS
#define FAST_HALF_PERIOD_NS 5
#endif

static vluint64_t main_time = 0;
// No event at all: the simulation is over (as in cocotb's loop).
static const vluint64_t NO_EVENT_PENDING = static_cast<vluint64_t>(~0ULL);

double sc_time_stamp() { return main_time; }

extern "C" {
void vlog_startup_routines_bootstrap(void);
}

static inline bool settle_value_callbacks() {
    bool cbs_called, again;
    cbs_called = again = VerilatedVpi::callValueCbs();
    while (again) again = VerilatedVpi::callValueCbs();
    return cbs_called;
}

static void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);
    trace_close();
#if VM_COVERAGE
    static bool coverage_written = false;  // wrap_up runs at exit and at the loop's end: write once
    if (!coverage_written) {
        coverage_written = true;
        VerilatedCov::write();  // to +verilator+coverage+file+NAME, default coverage.dat
    }
#endif
}

// One time step as in cocotb's loop, from its first eval_step (already done) on: returns
// whether any callback ran.
static inline bool first_settle() {
    VerilatedVpi::clearEvalNeeded();
    VerilatedVpi::doInertialPuts();
    return settle_value_callbacks();
}

static bool finish_step(Vtop* top, bool any) {
    do {
        while (VerilatedVpi::evalNeeded()) {
            top->eval_step();
            any |= first_settle();
        }
        any |= VerilatedVpi::callCbs(cbReadWriteSynch);
        VerilatedVpi::doInertialPuts();
        any |= settle_value_callbacks();
        if (VerilatedVpi::evalNeeded()) {
            top->eval_step();
            any |= first_settle();
        } else {
            break;
        }
    } while (true);
    top->eval_end_step();
    any |= VerilatedVpi::callCbs(cbReadOnlySynch);
    return any;
}

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);  // otherwise it will fail on systemtf

    // Half period in simulator time units (the time precision, e.g. 1 ps -> 5000).
    vluint64_t half = FAST_HALF_PERIOD_NS;
    for (int p = Verilated::threadContextp()->timeprecision(); p < -9; p++) half *= 10;

#ifdef COSIM_GPI_CLOCK
    vluint64_t next_edge = NO_EVENT_PENDING;  // cocotb's GPI clock drives clk
    (void)half;
#else
    top->clk = 0;
    vluint64_t next_edge = half;
#endif

#if VM_TRACE
    Verilated::traceEverOn(true);
    g_trace.vcd = new VerilatedVcdC(&g_trace.file);
    top->trace(g_trace.vcd, 99);
#endif

    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void*) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    bool quiet = false;  // the previous step (and its advance) ran no callback
    while (!Verilated::gotFinish()) {
        // ---- one time step at main_time
        top->eval_step();
        const bool vcb = first_settle();
        if (quiet && !vcb && !VerilatedVpi::evalNeeded()) {
            // Fast path: nothing else is registered for this step (see the header).
            top->eval_end_step();
        } else {
            quiet = !finish_step(top.get(), vcb);
        }
        trace_step(main_time);
        if (Verilated::gotFinish()) break;

        // ---- advance to the next time: the next clock edge or cocotb's next timed callback
        const vluint64_t next_cocotb = VerilatedVpi::cbNextDeadline();
        if (quiet && next_cocotb > next_edge) {
            main_time = next_edge;
            next_edge += half;
            top->clk = !top->clk;
            continue;
        }
        const vluint64_t next_time = std::min(next_cocotb, next_edge);
        if (next_time == NO_EVENT_PENDING) break;
        main_time = next_time;
        bool any = VerilatedVpi::callCbs(cbNextSimTime);
        any |= settle_value_callbacks();
        if (next_time == next_edge) {
            next_edge += half;
            top->clk = !top->clk;
        }
        any |= VerilatedVpi::callCbs(cbAfterDelay);
        any |= settle_value_callbacks();
        quiet = quiet && !any;
    }

    top->final();
    wrap_up();
    if (Verilated::threadContextp()->errorCount() > 0) return 1;
    return 0;
}
