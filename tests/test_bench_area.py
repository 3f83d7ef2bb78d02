"""The benchmark's area columns (cosim/bench/area.py): the cache key follows the config and
the RTL, --quick synthesizes nothing and shows only cached results, an Fmax that did not
finish is absent (never a number) and cached with its budget, which only a larger budget
retries, bad options fail in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cosim.bench import area
from cosim.cli import main as cosim_main
from hw.config import load_config, parse_config
from hw.introspect.parse import RTL_DIR


@pytest.fixture()
def build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path / "build" / "synth"


def test_cache_key_follows_config_and_rtl(tmp_path: Path) -> None:
    small, default = load_config("small"), load_config("default")
    assert area.cache_key(small) == area.cache_key(small) != area.cache_key(default)
    rtl = tmp_path / "rtl"
    shutil.copytree(RTL_DIR, rtl)
    assert area.cache_key(small, rtl) == area.cache_key(small)
    (rtl / "fetch.v").write_text((rtl / "fetch.v").read_text() + "\n// changed\n")
    assert area.cache_key(small, rtl) != area.cache_key(small)


def test_quick_shows_only_cached_results(build_dir: Path) -> None:
    cfg = load_config("small")
    res = area.measure_area([cfg], quick=True)
    assert res["small"]["source"] == "none" and res["small"]["status"].startswith("skipped")
    assert res["small"]["fmax"]["mhz"] is None and res["small"]["fmax"]["status"].startswith("skipped")
    assert not build_dir.exists()  # nothing was synthesized
    lines = area.table_lines(res)
    assert any(ln.startswith("small") and "skipped" in ln for ln in lines)
    # a result of an earlier run is shown as such
    cached = {"status": "ok", "ffs": 4550, "luts": 13581, "brams": 16, "memory_bits": 32768, "latches": 0,
              "comb_read_memories": [], "seconds": 22.3}
    area._store(build_dir / f"small-{area.cache_key(cfg)}-area.json", cached)
    res = area.measure_area([cfg], quick=True)
    assert {k: v for k, v in res["small"].items() if k != "fmax"} == {**cached, "source": "cached"}
    row = next(ln for ln in area.table_lines(res) if ln.startswith("small"))
    assert row.split()[1:4] == ["4550", "13581", "16"] and row.endswith("cached")


def test_fmax_that_does_not_finish_is_absent_and_cached_with_its_budget(build_dir: Path) -> None:
    cfg = load_config("small")
    est = area.fmax(cfg, timeout=0.01)
    assert est["mhz"] is None and est["status"].startswith("absent: yosys did not finish") and est["timed_out"], est
    assert est["source"] == "fresh" and not list(build_dir.glob("*-fmax.json"))  # no figure
    lines = area.table_lines({"small": {"status": "skipped", "fmax": est}})
    assert any("absent" in ln for ln in lines) and not any("MHz" in ln for ln in lines)
    # the absence answers the same or a smaller budget from the cache, without running anything ...
    for budget in (0.01, 0.005):
        again = area.fmax(cfg, quick=True, timeout=budget)
        assert again["source"] == "cached" and again["status"] == est["status"], again
    assert area.measure_area([cfg], quick=True, fmax_timeout=0.01)["small"]["fmax"]["source"] == "cached"
    # ... while a larger budget tries again (--quick: it would, so nothing is cached for it)
    larger = area.fmax(cfg, quick=True, timeout=900.0)
    assert larger["source"] == "none" and larger["status"].startswith("skipped"), larger
    assert area._load(area.fmax_cache_path(cfg, absent=True))["budget_s"] == 0.01
    # a larger budget that does not finish either replaces the absence (a figure would take its place)
    area._store_fmax(cfg, {**{k: v for k, v in est.items() if k != "source"}, "status": "absent: routing did "
                           "not finish within 900 s in all"}, 900.0)
    assert area.fmax(cfg, quick=True, timeout=900.0)["source"] == "cached"


def test_failed_fmax_is_not_cached(build_dir: Path) -> None:
    """An absence that is no timeout (a tool that failed, a task that was lost) is not the
    design's: it is not cached and the next run tries again."""
    cfg = load_config("small")
    area._store_fmax(cfg, {"mhz": None, "status": "absent: nextpnr failed: out of memory"}, 900.0)
    assert not build_dir.exists() or not list(build_dir.glob("*-fmax*.json"))
    assert area.fmax(cfg, quick=True, timeout=900.0)["source"] == "none"


def test_fmax_row_names_its_critical_path() -> None:
    est = {"mhz": 31.25, "status": "ok", "source": "cached",
           "critical_path": {"ns": 32.0, "logic_ns": 20.5, "routing_ns": 11.5, "start": "a", "end": "b",
                             "sources": ["alu_lane.v:31", "compute_unit.v:204"]}}
    lines = area.table_lines({"small": {"status": "skipped", "fmax": est}})
    assert any(ln.startswith("small") and "31.2 MHz (cached)" in ln for ln in lines), lines
    assert "  small critical path 32.0 ns (logic 20.5, routing 11.5): alu_lane.v:31 > compute_unit.v:204" in lines
    # routing that did not finish in time: absent, with the placement's estimate named as such
    est = {"mhz": None, "status": "absent: routing did not finish within 900 s in all (placement's estimate "
           "19.89 MHz)", "placed_mhz": 19.89, "source": "fresh", "critical_path": None}
    lines = area.table_lines({"small": {"status": "skipped", "fmax": est}})
    row = next(ln for ln in lines if ln.startswith("small"))
    assert "absent (placed 19.9 MHz)" in row and not any("critical path" in ln for ln in lines), lines


@pytest.mark.parametrize("value", ["0", "-3", "nan", "x"])
def test_bad_fmax_timeout_is_one_line(value: str, capsys: pytest.CaptureFixture) -> None:
    assert cosim_main(["bench", "--fmax-timeout", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fmax-timeout" in err[0] and "positive number of seconds" in err[0], err


def test_uncached_area_runs_as_an_engine_task(build_dir: Path) -> None:
    """What the cache lacks is synthesized by a task of the cluster engine (a real ECP5 synthesis of
    a 4-lane config, seconds), cached, and shown as cached afterwards."""
    tiny = parse_config({**load_config("small").to_dict(), "name": "tiny", "block": 4, "acc_depth": 16,
                         "inp_depth": 16, "wgt_depth": 16, "uop_depth": 16, "bus_width": 32})
    res = area.measure_area([tiny], cluster={"workers": 1})
    assert res["tiny"]["status"] == "ok" and res["tiny"]["source"] == "fresh", res
    assert res["tiny"]["luts"] > 1000 and res["tiny"]["ffs"] > 500 and "fmax" not in res["tiny"]
    assert list(build_dir.glob("tiny-*-area.json"))
    again = area.measure_area([tiny], quick=True)
    assert again["tiny"]["source"] == "cached" and again["tiny"]["luts"] == res["tiny"]["luts"]


def test_bad_scheduler_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cosim_main(["bench", "--scheduler", "no address"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--scheduler" in err[0], err
