// Standalone check of the raw harness's C++ DRAM model (dram_model.h) with several bursts in
// flight, the same cases as testbench/dram_model_bench.py runs on dram_model.v: an AR (AW) taken
// every cycle while earlier bursts are outstanding, each burst's first R beat RD_LAT cycles after
// its AR or right after the previous burst's last beat, W beats in AW order, each B WR_LAT cycles
// after its last W or right after the previous B, IDs echoed. Built with plain g++ by
// tests/test_raw_dram_model.py (-DRAW_BUS_BYTES=... as for the harness); prints one line and
// exits 0 when every check holds, 1 otherwise.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

static const uint32_t BB = RAW_BUS_BYTES;
static uint64_t g_cycle = 0;

#include "dram_model.h"

static int failures = 0;

static void expect(bool ok, const char* what, long long got, long long want) {
    if (!ok) {
        std::printf("dram_model_check: %s: got %lld, want %lld\n", what, got, want);
        failures++;
    }
}

static uint64_t pattern(uint32_t k) { return 0x1122334455667788ull + 0x0101010101010101ull * k; }

struct Burst { uint32_t addr, beats, id; };

int main() {
    Dram d;
    d.reset();
    for (uint32_t k = 0; k < 64; k++) {
        const uint64_t v = pattern(k);
        std::memcpy(&d.mem[(size_t)k * BB], &v, BB < 8 ? BB : 8);
    }
    uint8_t wdata[RAW_BUS_BYTES] = {0};

    // ---- reads in flight
    const std::vector<Burst> rb = {{0, 3, 5}, {8 * BB, 1, 2}, {12 * BB, 2, 9}, {20 * BB, 4, 5}};
    std::vector<uint64_t> ar_at;
    struct Beat { uint64_t cycle; uint32_t id, word; bool last; };
    std::vector<Beat> beats;
    uint32_t total = 0;
    for (const Burst& b : rb) total += b.beats;
    for (uint64_t c = 0; beats.size() < total && c < 2000; c++, g_cycle++) {
        const size_t i = ar_at.size();
        const bool arvalid = i < rb.size();
        const Burst b = arvalid ? rb[i] : Burst{0, 1, 0};
        if (arvalid && d.arready()) ar_at.push_back(c);
        if (d.rvalid) {
            uint64_t v = 0;
            std::memcpy(&v, d.rdata, BB < 8 ? BB : 8);
            uint32_t word = 0;
            while (word < 64 && pattern(word) != v) word++;
            beats.push_back({c, d.rid, word, d.rlast});
        }
        d.step(arvalid, b.addr, b.beats - 1, __builtin_ctz(BB), 1, b.id, true,
               false, 0, 0, 0, 0, 0, false, wdata, 0, false, true);
    }
    expect(ar_at.size() == rb.size(), "ARs taken", (long long)ar_at.size(), (long long)rb.size());
    expect(beats.size() == total, "R beats", (long long)beats.size(), total);
    size_t n = 0;
    uint64_t free_at = 0;
    for (size_t i = 0; i < rb.size() && i < ar_at.size(); i++) {
        expect(ar_at[i] == ar_at[0] + i, "AR cycle (one a cycle)", (long long)ar_at[i], (long long)(ar_at[0] + i));
        const uint64_t first = ar_at[i] + RAW_RD_LAT > free_at ? ar_at[i] + RAW_RD_LAT : free_at;
        for (uint32_t j = 0; j < rb[i].beats && n < beats.size(); j++, n++) {
            expect(beats[n].cycle == first + j, "R beat cycle", (long long)beats[n].cycle, (long long)(first + j));
            expect(beats[n].id == rb[i].id, "RID", beats[n].id, rb[i].id);
            expect(beats[n].word == rb[i].addr / BB + j, "R data (word)", beats[n].word, rb[i].addr / BB + j);
            expect(beats[n].last == (j + 1 == rb[i].beats), "RLAST", beats[n].last, j + 1 == rb[i].beats);
        }
        free_at = first + rb[i].beats;
    }

    // ---- writes in flight
    const std::vector<Burst> wb = {{40 * BB, 3, 3}, {44 * BB, 1, 7}, {46 * BB, 2, 3}};
    std::vector<uint32_t> wl;  // the W beats in order: burst index per beat
    for (size_t i = 0; i < wb.size(); i++)
        for (uint32_t j = 0; j < wb[i].beats; j++) wl.push_back((uint32_t)i);
    std::vector<uint64_t> aw_at, w_at;
    struct Resp { uint64_t cycle; uint32_t id, resp; };
    std::vector<Resp> bs;
    for (uint64_t c = 0; bs.size() < wb.size() && c < 2000; c++, g_cycle++) {
        const size_t i = aw_at.size(), j = w_at.size();
        const bool awvalid = i < wb.size(), wvalid = j < wl.size();
        const Burst b = awvalid ? wb[i] : Burst{0, 1, 0};
        const bool wready = d.wready(awvalid);
        bool wlast = false;
        if (wvalid) {
            const uint32_t k = (uint32_t)j;  // beat k of the stream; its value is 0xB000 + k
            const uint64_t v = 0xB000 + k;
            std::memset(wdata, 0, BB);
            std::memcpy(wdata, &v, BB < 8 ? BB : 8);
            wlast = (j + 1 == wl.size()) || wl[j + 1] != wl[j];
        }
        if (awvalid && d.awready()) aw_at.push_back(c);
        if (wvalid && wready) w_at.push_back(c);
        if (d.bvalid) bs.push_back({c, d.bid, d.bresp});
        d.step(false, 0, 0, 0, 1, 0, true, awvalid, b.addr, b.beats - 1, __builtin_ctz(BB), 1, b.id,
               wvalid, wdata, ~0ull, wlast, true);
    }
    expect(aw_at.size() == wb.size(), "AWs taken", (long long)aw_at.size(), (long long)wb.size());
    expect(bs.size() == wb.size(), "B responses", (long long)bs.size(), (long long)wb.size());
    expect(w_at.size() == wl.size(), "W beats", (long long)w_at.size(), (long long)wl.size());
    for (size_t j = 0; j < w_at.size() && !aw_at.empty(); j++)
        expect(w_at[j] == aw_at[0] + j, "W cycle (one a cycle from the first AW)", (long long)w_at[j],
               (long long)(aw_at[0] + j));
    uint64_t prev = 0;
    size_t k = 0;
    for (size_t i = 0; i < wb.size() && i < bs.size() && i < aw_at.size(); i++) {
        expect(aw_at[i] == aw_at[0] + i, "AW cycle (one a cycle)", (long long)aw_at[i], (long long)(aw_at[0] + i));
        k += wb[i].beats;
        uint64_t want = (k - 1 < w_at.size() ? w_at[k - 1] : 0) + RAW_WR_LAT;
        if (i > 0 && prev + 1 > want) want = prev + 1;
        expect(bs[i].cycle == want, "B cycle", (long long)bs[i].cycle, (long long)want);
        expect(bs[i].id == wb[i].id, "BID", bs[i].id, wb[i].id);
        expect(bs[i].resp == 0, "BRESP", bs[i].resp, 0);
        prev = bs[i].cycle;
    }
    k = 0;
    for (const Burst& b : wb)
        for (uint32_t j = 0; j < b.beats; j++, k++) {
            uint64_t v = 0;
            std::memcpy(&v, &d.mem[(size_t)(b.addr / BB + j) * BB], BB < 8 ? BB : 8);
            expect(v == 0xB000 + k, "written word", (long long)v, (long long)(0xB000 + k));
        }
    expect(!d.proto_err, "protocol error", d.proto_err, 0);

    if (failures) return 1;
    std::printf("dram_model_check: ok (Lr=%d Lw=%d bus=%u bytes)\n", (int)RAW_RD_LAT, (int)RAW_WR_LAT, BB);
    return 0;
}
