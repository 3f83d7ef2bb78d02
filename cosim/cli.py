"""The `cosim` console command.

Each subcommand lives in its own module under ``cosim/commands`` with two functions:
``add_parser(subparsers)`` and ``run(args) -> int``. A user error (bad argument,
bad file, bad config, Program or kernel) prints one line on stderr and exits 2:
argparse's own errors too (the usage is printed by ``--help`` only). ``--traceback``
on any command (or ``COSIM_TRACEBACK=1``) prints the whole traceback before that
line; ``COSIM_DEBUG=1`` lets the exception propagate instead. A missing tool or an RTL that cannot be
built or simulated here is a user-side problem too (exit 2); any other exception is a bug of cosim,
reported in one ``internal error`` line with exit code 3 (also when something calls ``sys.exit``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn

# Subcommands in the order `cosim --help` lists them.
COMMANDS = ["list", "compile", "import", "run", "disasm", "sim", "net", "generate", "waves", "rtl", "fuzz", "regress", "bench",
            "calibrate", "sweep", "coverage", "mutate", "report", "conformance", "docs", "clean"]
# A command whose name is a Python keyword lives in a module named otherwise.
MODULES = {"import": "import_"}


class UserError(ValueError):
    """A problem with what the user asked for (reported in one line, exit 2)."""


def config_arg(text: str) -> str:
    """An argparse ``type`` for a hardware config: a shipped config's name stays a name, a path to a JSON
    file is made absolute (tasks and simulators run in folders of their own, where a relative path
    names nothing)."""
    folder_arg(text)
    if text.endswith(".json") or "/" in text or "\\" in text:
        return str(Path(text).resolve())
    return text


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=config_arg, default="default", metavar="NAME|PATH",
                   help="hardware config: a name from hw/configs or a JSON path (default: default)")


def settle_rtl_options(args: argparse.Namespace, models: list[str]) -> None:
    """Refuse ``--mem``/``--sim`` given to a run without the RTL (they would be silently ignored), then fill
    their defaults (fast, verilator)."""
    for name, value in (("--mem", args.mem), ("--sim", args.sim)):
        if value is not None and "rtl" not in models:
            raise UserError(f"{name} is an option of the RTL model, and this run is --model {args.model} "
                            f"(add --model rtl or all)")
    args.mem, args.sim = args.mem or "fast", args.sim or "verilator"


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


# The largest count of cycles an option takes: 10^12 cycles of 10 ns are 10^19 ps, still inside the
# simulator's 64-bit time (cocotb and Verilator count in ps); no run is anywhere near that long.
MAX_CYCLES = 10**12
# The largest other integer an option takes (a seed, a count): what a signed 64-bit integer holds.
MAX_INT = 2**63 - 1


def int_arg(low: int, high: int = MAX_INT, what: str = "") -> Any:
    """An argparse ``type``: an integer in ``[low, high]``; the error names the bound (argparse adds
    the option: ``argument --seed: expected a non-negative integer, not '-1'``)."""
    kind = what or {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")

    def parse(text: str) -> int:
        t = text.strip()
        # decimal (05 is 5), or 0x/0b/0o; not Python's other spellings (1_0, digits of other scripts)
        if not re.fullmatch(r"[+-]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+)", t):
            raise argparse.ArgumentTypeError(f"expected {kind}, not {text!r}")
        v = int(t, 0) if re.match(r"[+-]?0[xXbBoO]", t) else int(t, 10)
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {kind}, not {text!r}")
        if v > high:
            raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {high:,})")
        return v

    parse.__name__ = kind  # argparse's fallback message names the type by this
    return parse


def folder_arg(text: str) -> str:
    """An argparse ``type``: a file or folder name that is not empty (``-o ''`` would write into the CWD)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file or folder name, not an empty string")
    return text


def output_arg(text: str) -> str:
    """An argparse ``type`` for a file to write: :func:`folder_arg`, not a FIFO or socket (opening one
    blocks until a reader comes; /dev/null is fine), not a folder, and not under a file."""
    import stat

    folder_arg(text)
    parent = Path(text).parent
    if parent.exists() and not parent.is_dir():  # said now, not after the whole run when the file is written
        raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, where a folder is needed")
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):
        return text
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise argparse.ArgumentTypeError(f"{text}: a FIFO or socket, not a file to write")
    if stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{text}: a folder, not a file to write")
    return text


def input_file_of(text: str | None) -> Path | None:
    """The existing file an input argument names (``cfg.json``, ``net.py:function``, ``@x.npy``, ``w.npz:name``,
    ``NAME=@x.npy``), or None (a shipped name, a folder, nothing)."""
    if not text:
        return None
    for ref in (text, text.split("=", 1)[-1]):
        ref = ref[1:] if ref.startswith("@") else ref
        for cand in (ref, ref.split(".npz:", 1)[0] + ".npz" if ".npz:" in ref else "", ref.rsplit(":", 1)[0]):
            if cand and Path(cand).is_file():
                return Path(cand)
    return None


def config_file_of(text: str | None) -> str | None:
    """The file a ``--config`` value reads (a shipped name is its JSON under hw/configs), for
    :func:`claim_outputs`; None when not given."""
    if not text:
        return None
    from hw.config import config_path

    try:
        return str(config_path(text))
    except (OSError, ValueError):
        return None


def claim_outputs(outputs: list[tuple[str, str | None]], inputs: list[tuple[str, str | None]]) -> None:
    """Before a run writes its output files (``outputs``: option and path, None when not given): refuse one that
    is an input file of the run (``inputs``: argument and value, see :func:`input_file_of`; it would be
    overwritten) or that another output names, and make each one's folder now, so that a place that cannot be
    written is one line before the run rather than after it (UserError). ``os.devnull`` is never refused."""
    given = {}
    for what, text in inputs:
        f = input_file_of(text)
        if f is not None:
            given[f.resolve()] = f"{what} {text}"
    seen: dict[Path, str] = {}
    for opt, value in outputs:
        if not value or value == os.devnull:
            continue
        out = Path(value)
        key = out.resolve()
        if key in given:
            raise UserError(f"{opt} {value}: is the file of {given[key]}, an input of this run (it would be "
                            f"overwritten; write it elsewhere)")
        if key in seen:
            raise UserError(f"{seen[key]} and {opt} name the same file {value} (one would replace the other)")
        seen[key] = opt
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{opt} {value}: cannot make its folder {out.parent}: {e.strerror or e}") from None
        if not os.access(out if out.exists() else out.parent, os.W_OK):
            raise UserError(f"{opt} {value}: not writable here")


def claim_program_folder(out: str) -> None:
    """Refuse ``-o out`` (UserError) when it is a folder of someone else's files that writing a Program folder
    there would replace: files of a Program folder's names while it has no layout.json. A Program folder
    cosim wrote is written again (a compile again)."""
    from hw.program import DATA_FILES, FILES

    d = Path(out)
    if not d.is_dir() or (d / "layout.json").is_file():
        return
    clash = [n for n in (*FILES, *DATA_FILES) if (d / n).exists()]
    if clash:
        raise UserError(f"-o {out}: {', '.join(clash)} {'is' if len(clash) == 1 else 'are'} there and the folder is "
                        f"not a Program folder (no layout.json): writing one would replace "
                        f"{'it' if len(clash) == 1 else 'them'}; write the folder elsewhere")


def float_arg(low: float, high: float, what: str) -> Any:
    """An argparse ``type``: a finite number in ``[low, high]`` (``what`` names it in the error)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not low <= v <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}")
        return v

    parse.__name__ = what
    return parse


class CosimArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``cosim run: error: <what> (see cosim run --help)``, exit 2.

    Every subcommand parser is of this class (``add_subparsers`` makes its parsers of the
    parent's class), and each gets ``--traceback``."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())  # argparse may wrap a long choice list
        self.exit(2, f"{self.prog}: error: {line} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def, override]
        """argparse's, but an unrecognized argument is reported by the (sub)command that was given it, and
        a command with subcommands given none (``cosim``, ``cosim waves``) is one error line, not the help."""
        ns, extra = self.parse_known_args(args, namespace)
        prog = getattr(ns, "_prog", self.prog)
        if extra:
            self.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see {prog} --help)\n")
        needs = getattr(ns, "_needs_command", None)
        if needs and getattr(ns, needs, None) is None:
            self.exit(2, f"{prog}: error: a command is required (see {prog} --help)\n")
        return ns

    def add_subparsers(self, **kw):  # type: ignore[no-untyped-def]
        sub = super().add_subparsers(**kw)
        self.set_defaults(_needs_command=kw.get("dest"))  # the innermost parser given wins (see parse_args)
        add_parser = sub.add_parser

        def add_with_traceback(name: str, **pkw):  # type: ignore[no-untyped-def]
            p = add_parser(name, **pkw)
            _add_traceback_arg(p)
            p.set_defaults(_prog=p.prog)  # the innermost subcommand's wins: who names an unknown argument
            return p

        sub.add_parser = add_with_traceback  # type: ignore[method-assign]
        return sub


def _add_traceback_arg(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's default must not overwrite `cosim --traceback run ...`
    p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                   help="on an error, print the whole traceback (also: env COSIM_TRACEBACK=1)")


def build_parser() -> argparse.ArgumentParser:
    ap = CosimArgumentParser(prog="cosim", description="Co-simulation of a VTA-like tensor accelerator: "
                             "compile kernels to Programs and run them on golden, TLM and RTL models.")
    _add_traceback_arg(ap)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"cosim.commands.{MODULES.get(name, name)}")
        except ModuleNotFoundError as e:
            if e.name != f"cosim.commands.{MODULES.get(name, name)}":
                raise
            continue  # not built yet
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return ap


# Exit code of an internal error (a bug of cosim, not of the input); 1 is "does not agree", 2 a user error.
INTERNAL_ERROR_EXIT = 3


def is_user_error(e: BaseException) -> bool:
    """Whether ``e`` reports a problem on the user's side (bad input, a missing tool, a simulator that
    cannot be built or run on this machine: exit 2) rather than a bug of cosim (exit 3)."""
    from cosim.models import model_failure_types
    from hw.toolchain import ToolchainError

    return isinstance(e, (ValueError, OSError, LookupError, ToolchainError, *model_failure_types()))


def error_line(e: BaseException) -> str:
    """The one line that reports a user error: its message's first line, naming the file when it has one."""
    try:
        text = str(e).strip()
    except Exception:  # an exception whose message cannot be made
        text = ""
    msg = text.splitlines()[0] if text else type(e).__name__
    if isinstance(e, OSError) and e.filename and e.strerror and text.startswith(f"[Errno {e.errno}] "):
        # the system's own message ("[Errno 2] No such file or directory: 'x'") as "x: No such file or directory"
        names = f"{e.filename} -> {e.filename2}" if e.filename2 else f"{e.filename}"
        msg = f"{names}: {e.strerror}"
    elif isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
        msg = f"{e.filename}: {msg}"
    if isinstance(e, FileExistsError) and e.filename and os.path.lexists(e.filename) and not os.path.isdir(e.filename):
        msg = f"{e.filename}: a file, where a folder is needed"  # making a folder where a file is
    if isinstance(e, KeyError) and msg == text:  # a bare KeyError's text is only the quoted key
        msg = f"KeyError: {msg}"
    return msg


class _Seen:
    """Whether a Ctrl-C came since :func:`watch_sigint`."""

    sigint = False
    sigterm = False


def _on_sigint(signum: int, frame: Any) -> None:
    _Seen.sigint = True
    raise KeyboardInterrupt


class Terminated(KeyboardInterrupt):
    """SIGTERM came: unwound as a Ctrl-C is (the simulator or compiler being waited for is killed, work
    folders removed, locks released, a campaign's cluster stopped and its results file left valid)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _Seen.sigint = _Seen.sigterm = True
    raise Terminated


def watch_sigint() -> Callable[[], None]:
    """Note every Ctrl-C (then raise KeyboardInterrupt, as Python does) until the returned undo is called.
    A library may turn the KeyboardInterrupt into another error (numpy's import, interrupted in its C
    extension, raises ImportError): :func:`sigint_seen` still tells it was a Ctrl-C. A SIGTERM unwinds the
    same way (:class:`Terminated`); without it Python would end at once, leaving a simulator or a compiler
    running on in a build folder no lock protects any more."""
    _Seen.sigint = _Seen.sigterm = False
    main_thread = threading.current_thread() is threading.main_thread()
    if not main_thread or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return lambda: None  # Ctrl-C ignored, or handled by the program around: leave it so
    signal.signal(signal.SIGINT, _on_sigint)
    term = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if term:
        signal.signal(signal.SIGTERM, _on_sigterm)

    def undo() -> None:
        if signal.getsignal(signal.SIGINT) is _on_sigint:  # not if the command chose to ignore it from now on
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if term and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return undo


def sigint_seen() -> bool:
    """Whether a Ctrl-C came since :func:`watch_sigint`."""
    return _Seen.sigint


def forget_handled_interrupt() -> None:
    """Let the exit code of a handled Ctrl-C be 130. CPython 3.11 notes a KeyboardInterrupt that leaves code
    run by ``exec`` of a string (dataclasses and namedtuple make their methods so, at import) as unhandled,
    even when it is caught later, and then ends the process by SIGINT instead of with the code returned."""
    import ctypes

    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ValueError, AttributeError):  # another Python keeps it elsewhere (or not at all)
        pass


def _interrupted(who: str, e: BaseException) -> int:
    """Say that a Ctrl-C (exit 130) or a SIGTERM (exit 143) ended the command."""
    if _Seen.sigterm or isinstance(e, Terminated):  # a command may turn it into its own KeyboardInterrupt
        print(f"{who}: terminated", file=sys.stderr)
        return 143
    print(f"{who}: interrupted", file=sys.stderr)
    return 130


def main(argv: list[str] | None = None) -> int:
    stop_watching = watch_sigint()
    try:
        return _main(argv)
    finally:
        stop_watching()


def _main(argv: list[str] | None) -> int:
    try:
        from cosim.models import pin_build_root

        pin_build_root()
        ap = build_parser()  # imports every command: seconds on a loaded machine, so Ctrl-C may come here
        args = ap.parse_args(argv)
    except SystemExit as e:  # --help (0) or a one-line argparse error (2)
        return int(e.code or 0)
    except BaseException as e:
        if not (isinstance(e, KeyboardInterrupt) or sigint_seen()):
            raise
        forget_handled_interrupt()
        given = sys.argv[1:] if argv is None else argv
        name = next((a for a in given if a in COMMANDS), None)
        return _interrupted(f"cosim{' ' + name if name else ''}", e)
    if not getattr(args, "_run", None):  # argparse requires a command; kept for a parser built otherwise
        print("cosim: error: a command is required (see cosim --help)", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt as e:
        forget_handled_interrupt()
        return _interrupted(f"cosim {args.command}", e)
    except Exception as e:
        if sigint_seen():  # a Ctrl-C that a library turned into another error
            forget_handled_interrupt()
            return _interrupted(f"cosim {args.command}", e)
        if os.environ.get("COSIM_DEBUG"):
            raise
        if getattr(args, "traceback", False) or os.environ.get("COSIM_TRACEBACK", "") not in ("", "0"):
            traceback.print_exception(e, file=sys.stderr)
        if is_user_error(e):
            print(f"cosim {args.command}: error: {error_line(e)}", file=sys.stderr)
            return 2
        # A bug of this tool, not of the input: still one line, and an exit code of its own.
        print(f"cosim {args.command}: internal error: {type(e).__name__}: {error_line(e)} (--traceback or "
              f"COSIM_TRACEBACK=1 shows where)", file=sys.stderr)
        return INTERNAL_ERROR_EXIT
    except SystemExit as e:  # something under a command called sys.exit: never success in disguise
        if os.environ.get("COSIM_DEBUG"):
            raise
        print(f"cosim {args.command}: internal error: exited with sys.exit({e.code!r})", file=sys.stderr)
        return e.code if isinstance(e.code, int) and e.code not in (0, 2) else INTERNAL_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
