// cocotb + Verilator main for the fast back-end: cocotb's own main loop (share/lib/verilator/
// verilator.cpp of cocotb 2.1) with the clock toggled here, in C++, and a quiet fast path.
//
// Used by testbench/rtl_model.py instead of cocotb's verilator.cpp for tb_fast builds without
// waves. Differences from cocotb's loop, and why they keep its semantics:
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
// No tracing: builds with waves use cocotb's main and GPI clock.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#ifndef FAST_HALF_PERIOD_NS
#define FAST_HALF_PERIOD_NS 5
#endif

static vluint64_t main_time = 0;

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

static void wrap_up() { VerilatedVpi::callCbs(cbEndOfSimulation); }

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

    top->clk = 0;
    vluint64_t next_edge = half;

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
