"""The invalid-inputs corpus (cosim/fuzz/corpus.py): every entry is refused cleanly, by the right layer.

For each entry: the exact error class and the key words of its one-line message
(in-process), the `cosim` exit code (2 for config/loader/runner errors, 1 for a fault
a model reports) with no traceback, and for model entries the TLM's TlmError code and
pc and the reference interpreter's. The RTL runs the model entries (STATUS.error, ERR_PC,
and the TLM's cycles) in tests/units/test_errors.py.
The corpus is generated into a temporary folder: nothing binary is committed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hw.config import ConfigError, load_config
from hw.program import Program, ProgramError
from cosim import models
from cosim.cli import main as cosim_main
from cosim.fuzz.corpus import entries, entry_path, write_corpus
from sim.iss import run_reference
from sim.tlm import TlmError, run_program

ENTRIES = entries()
BY_NAME = {e.name: e for e in ENTRIES}
FOLDER = [e.name for e in ENTRIES if e.make is not None]
ERRORS = {"ConfigError": ConfigError, "ProgramError": ProgramError, "ValueError": ValueError, "TlmError": TlmError}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(root)
    return root


def _cli_args(root: Path, name: str) -> list[str]:
    e = BY_NAME[name]
    path = str(entry_path(root, e))
    if e.layer == "config":
        return ["run", "vadd", "--model", "tlm", "--config", path]
    args = [e.cli, path] + (["--model", "tlm"] if e.cli == "run" else [])
    return args + (["--config", e.config] if e.config else [])


def test_corpus_is_deterministic_and_complete(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_corpus(a)
    write_corpus(b)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files if f.suffix != ".npz")
    layers = {e.layer for e in ENTRIES}
    assert layers == {"config", "loader", "runner", "model"} and len(ENTRIES) >= 60


@pytest.mark.parametrize("name", [e.name for e in ENTRIES])
def test_entry_raises_the_named_error(corpus, name):
    """The exact error class, its key words, and for model entries the code and pc."""
    e = BY_NAME[name]
    path = entry_path(corpus, e)
    with pytest.raises(Exception) as info:
        if e.layer == "config":
            load_config(path)
        elif e.layer == "loader":
            Program.load(path, load_config(e.config) if e.config else None)
        elif e.layer == "runner":
            models.make_job(str(path), load_config(e.config))
        else:
            prog = Program.load(path, load_config(e.config)) if e.make is not None else e.program
            run_program(prog)
    assert type(info.value) is ERRORS[e.error], repr(info.value)
    msg = str(info.value)
    assert "\n" not in msg
    for k in e.keywords:
        assert k in msg, (k, msg)
    if e.layer == "model":
        assert (info.value.name, info.value.pc) == (e.code, e.pc), msg
        ref = run_reference(e.program).error  # the independent reference agrees
        assert (ref["name"], ref["pc"]) == (e.code, e.pc)


@pytest.mark.parametrize("name", FOLDER)
def test_cosim_reports_in_one_line(corpus, name, capsys, monkeypatch):
    """`cosim` on the entry: exit 2 (config/loader/runner) or 1 (model fault), no traceback."""
    monkeypatch.delenv("COSIM_DEBUG", raising=False)
    e = BY_NAME[name]
    rc = cosim_main(_cli_args(corpus, name))  # an uncaught exception would fail this test
    out, err = capsys.readouterr()
    if e.layer == "model":
        assert rc == 1, out + err
        assert f"error {e.code} at instruction {e.pc}" in out
    else:
        assert rc == 2, out + err
        assert len(err.strip().splitlines()) == 1 and err.startswith("cosim ")
        for k in e.keywords:
            assert k in err, (k, err)


@pytest.mark.parametrize("name", ["insn_truncated_partial_word", "layout_overlap", "config_block_not_pow2",
                                  "missing_inputs", "other_config", "deadlock_token_cycle", "dram_store_off_layout"])
def test_cosim_subprocess_exit_codes(corpus, name):
    """The same, as a real process: exit code, one stderr line, no 'Traceback', no hang."""
    e = BY_NAME[name]
    r = subprocess.run([sys.executable, "-m", "cosim.cli", *_cli_args(corpus, name)], capture_output=True, text=True,
                       timeout=120)
    assert "Traceback" not in r.stderr
    assert r.returncode == (1 if e.layer == "model" else 2), r.stdout + r.stderr
    if e.layer != "model":
        assert len(r.stderr.strip().splitlines()) == 1 and all(k in r.stderr for k in e.keywords)

