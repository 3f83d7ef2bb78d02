// The raw harness's C++ DRAM model (struct Dram), included by harness.cpp and by the standalone
// check dram_model_check.cpp. The includer defines RAW_BUS_BYTES, RAW_RD_LAT, RAW_WR_LAT,
// RAW_MEM_BYTES and RAW_MAX_BURST, and before the include `BB` (bytes per beat) and `g_cycle`
// (the cycle count its messages quote).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// A translation of dram_model.v's always block (same cycle timing): `reg <=` assignments read the
// values from before the edge, blocking ones (memory, queues) act at once.
struct Dram {
    std::vector<uint8_t> mem;
    uint32_t words;
    // read channel: accepted bursts in AR order (a ring; the head is on or next on R)
    static constexpr uint32_t RD_QUEUE = 8;  // dram_model.v's default
    struct ReadBurst { uint32_t addr, len, id; uint64_t due; bool err; };
    ReadBurst q[RD_QUEUE] = {};
    uint32_t q_head = 0, q_tail = 0, q_cnt = 0;
    uint64_t now = 0;  // index of the current cycle (since reset)
    uint32_t rd_addr = 0, rd_left = 0;
    bool rvalid = false, rlast = false;
    uint32_t rresp = 0, rid = 0;
    uint8_t rdata[RAW_BUS_BYTES] = {0};
    // write channel: the burst taking W beats, the accepted AWs after it and the bursts awaiting
    // B (rings, in AW order)
    static constexpr uint32_t WR_QUEUE = 8;  // dram_model.v's default
    struct WriteBurst { uint32_t addr, beats, id; bool inject; };
    struct WriteResp { uint32_t resp, id; uint64_t due; };
    WriteBurst aw_q[WR_QUEUE] = {};
    WriteResp b_q[WR_QUEUE] = {};
    uint32_t aw_head = 0, aw_tail = 0, aw_cnt = 0, b_head = 0, b_tail = 0, b_cnt = 0, wr_open = 0;
    bool w_busy = false, w_inject = false;
    uint32_t w_addr = 0, w_left = 0, w_id = 0;
    bool w_err = false;
    bool bvalid = false;
    uint32_t bresp = 0, bid = 0;
    bool proto_err = false;
    // Harness-only variations (job line `dram_mode STALL ERR_RESP ERR_READ ERR_WRITE`): with STALL
    // non-zero, ARREADY, AWREADY and WREADY drop on cycles drawn from an LFSR seeded with it (each
    // about one cycle in three: backpressure); with ERR_RESP (2 SLVERR, 3 DECERR) non-zero, read
    // burst number ERR_READ and write burst number ERR_WRITE (0-based, counted from reset; -1: none)
    // answer ERR_RESP on every beat / on B. `ids` is the OR of every ARID and AWID taken.
    uint32_t lfsr = 0, err_resp = 0;
    int64_t err_read = -1, err_write = -1, n_reads = 0, n_writes = 0;
    bool stall_ar = false, stall_aw = false, stall_w = false, rd_err = false, wr_inject = false;
    // With STALL non-zero the model also takes W beats before their AW handshake (AXI allows it): while
    // AWVALID is up with AWREADY stalled and no burst takes W, the W beats go to AWADDR (held stable
    // while AWVALID). `aw_early`: the burst taking W is the AW not yet taken; its B waits for that AW
    // (`b_early`: the B of a burst whose last beat came first).
    bool aw_early = false, b_early = false;
    uint32_t b_early_resp = 0;
    uint32_t ids = 0;

    Dram() : mem(RAW_MEM_BYTES, 0), words(RAW_MEM_BYTES / RAW_BUS_BYTES) {}

    // The next cycle's READY stalls (called once per cycle, after the edge).
    void draw_stalls() {
        if (lfsr == 0) return;
        uint32_t r[3];
        for (int k = 0; k < 3; k++) {
            lfsr ^= lfsr << 13; lfsr ^= lfsr >> 17; lfsr ^= lfsr << 5;  // xorshift32
            r[k] = lfsr % 3;
        }
        stall_ar = r[0] == 0; stall_aw = r[1] == 0; stall_w = r[2] == 0;
    }

    static bool in_range(uint32_t a) { return (uint64_t)a < (uint64_t)RAW_MEM_BYTES; }
    uint8_t* word(uint32_t a) { return &mem[(size_t)((a / BB) & (words - 1)) * BB]; }

    void check_burst(uint32_t addr, uint32_t len, uint32_t size, uint32_t burst, bool is_write) {
        uint32_t off_bits = 0;
        while ((1u << off_bits) < BB) off_bits++;
        if (burst != 1 || size != (off_bits & 7) || (addr & (BB - 1)) != 0 || len + 1 > RAW_MAX_BURST ||
            (addr & 0xFFF) + (len + 1) * BB > 4096) {
            std::fprintf(stderr, "raw dram: cycle %llu: protocol violation on %s: addr=0x%08x len=%u size=%u burst=%u\n",
                         (unsigned long long)g_cycle, is_write ? "AW" : "AR", addr, len, size, burst);
            proto_err = true;
        }
    }

    void reset() {
        q_head = 0; q_tail = 0; q_cnt = 0; now = 0; rd_addr = 0; rd_left = 0;
        rvalid = false; rlast = false; rresp = 0; std::memset(rdata, 0, BB); rid = 0;
        aw_head = aw_tail = aw_cnt = b_head = b_tail = b_cnt = wr_open = 0;
        w_busy = false; w_inject = false; w_addr = 0; w_left = 0; w_id = 0; w_err = false;
        aw_early = false; b_early = false; b_early_resp = 0;
        bvalid = false; bresp = 0; bid = 0;
    }

    bool arready() const { return q_cnt < RD_QUEUE && !stall_ar; }
    bool awready() const { return wr_open < WR_QUEUE && !stall_aw; }
    bool wready(bool awvalid) const {
        return !stall_w && (w_busy || (awvalid && (awready() || (lfsr != 0 && !b_early && wr_open < WR_QUEUE))));
    }

    void read_beat(uint32_t a) {
        if (in_range(a)) { std::memcpy(rdata, word(a), BB); rresp = rd_err ? err_resp : 0; }
        else { std::memset(rdata, 0, BB); rresp = 2; }
    }

    // One clock edge, given the master's outputs from before the edge.
    void step(bool arvalid, uint32_t araddr, uint32_t arlen, uint32_t arsize, uint32_t arburst, uint32_t arid,
              bool rready, bool awvalid, uint32_t awaddr, uint32_t awlen, uint32_t awsize, uint32_t awburst,
              uint32_t awid, bool wvalid, const uint8_t* wdata, uint64_t wstrb, bool wlast, bool bready) {
        // ---- read: the R handshake (next beat or pop), the AR handshake (push), then the head's
        // first beat once it is due and R is free
        const bool ar_take = arvalid && arready();
        bool rv = rvalid;
        if (rv && rready) {
            if (rlast) {
                rv = false; rlast = false;
                q_head = (q_head + 1) % RD_QUEUE; q_cnt--;
            } else {
                rd_addr += BB; rd_left = (rd_left - 1) & 0xFF;
                rlast = (rd_left == 0);
                read_beat(rd_addr);
            }
        }
        if (ar_take) {
            check_burst(araddr, arlen, arsize, arburst, false);
            q[q_tail] = ReadBurst{araddr, arlen, arid, now + RAW_RD_LAT, err_resp != 0 && n_reads == err_read};
            n_reads++;
            ids |= arid;
            q_tail = (q_tail + 1) % RD_QUEUE; q_cnt++;
        }
        if (!rv && q_cnt != 0 && q[q_head].due <= now + 1) {
            const ReadBurst& h = q[q_head];
            rv = true; rd_addr = h.addr; rd_left = h.len; rid = h.id; rd_err = h.err;
            rlast = (rd_left == 0);
            read_beat(rd_addr);
        }
        rvalid = rv;
        // ---- write: B handshake (pop), AW (start or queue), W beat (last: queue its B, start the
        // next queued AW), then the head's B once it is due and B is free
        const bool aw_take = awvalid && awready();
        const bool w_take = wvalid && wready(awvalid);
        bool bv = bvalid;
        if (bv && bready) {
            bv = false; b_head = (b_head + 1) % WR_QUEUE; b_cnt--; wr_open--;
        }
        const bool was_early = aw_early || b_early;  // this AW's W beats started before it was taken
        if (aw_take) {
            check_burst(awaddr, awlen, awsize, awburst, true);
            const bool inject = err_resp != 0 && n_writes == err_write;
            n_writes++;
            ids |= awid;
            wr_open++;
            if (was_early) {
                aw_early = false;
                if (b_early) {  // its last W beat came first: its B is queued now
                    b_q[b_tail] = WriteResp{b_early_resp, awid, now + RAW_WR_LAT};
                    b_tail = (b_tail + 1) % WR_QUEUE; b_cnt++;
                    b_early = false;
                }
            } else if (!w_busy) {
                w_busy = true; w_addr = awaddr; w_left = (awlen + 1) & 0x1FF; w_err = false; w_id = awid;
                w_inject = inject;
            } else {
                aw_q[aw_tail] = WriteBurst{awaddr, (awlen + 1) & 0x1FF, awid, inject};
                aw_tail = (aw_tail + 1) % WR_QUEUE; aw_cnt++;
            }
        }
        if (w_take && !w_busy) {  // a W beat before its AW handshake (stall mode only): the burst at AWADDR
            w_busy = true; w_addr = awaddr; w_left = (awlen + 1) & 0x1FF; w_err = false; w_id = awid;
            w_inject = err_resp != 0 && n_writes == err_write;
            aw_early = true;
        }
        if (w_take) {
            if (wlast != (w_left == 1)) {
                std::fprintf(stderr, "raw dram: cycle %llu: protocol violation: WLAST=%d with %u beats left\n",
                             (unsigned long long)g_cycle, (int)wlast, w_left);
                proto_err = true;
            }
            if (in_range(w_addr)) {
                uint8_t* w = word(w_addr);
                for (uint32_t b = 0; b < BB; b++)
                    if ((wstrb >> b) & 1) w[b] = wdata[b];
            } else {
                w_err = true;
            }
            if (w_left == 1 || wlast) {
                const uint32_t resp = w_err ? 2u : w_inject ? err_resp : 0u;
                if (aw_early) {  // the AW is still to come: its B waits for it
                    b_early = true; b_early_resp = resp; aw_early = false;
                } else {
                    b_q[b_tail] = WriteResp{resp, w_id, now + RAW_WR_LAT};
                    b_tail = (b_tail + 1) % WR_QUEUE; b_cnt++;
                }
                w_busy = false;
                if (aw_cnt != 0) {
                    const WriteBurst& n = aw_q[aw_head];
                    w_busy = true; w_addr = n.addr; w_left = n.beats; w_err = false; w_id = n.id;
                    w_inject = n.inject;
                    aw_head = (aw_head + 1) % WR_QUEUE; aw_cnt--;
                }
            } else {
                w_addr += BB; w_left = (w_left - 1) & 0x1FF;
            }
        }
        if (!bv && b_cnt != 0 && b_q[b_head].due <= now + 1) {
            bv = true; bresp = b_q[b_head].resp; bid = b_q[b_head].id;
        }
        bvalid = bv;
        now++;
    }
};

