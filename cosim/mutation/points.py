"""Mutation points of the RTL: every single-change mutant a token-level scan of each module finds.

Where mutants go (the design's logic only):
* the right-hand side of a continuous assignment (``assign``, a ``wire`` declaration) or of a
  procedural assignment inside ``always``/``function`` (``=`` and ``<=``);
* the condition of a procedural ``if``;
* a procedural assignment to a plain register (a stuck bit after it).

Never in declarations (parameters, ranges, ports), loop headers, case labels, instance
connections, bit/part selects' bounds, replication counts, `` `ifdef`` regions (simulation
checks) or the debug probes (``dbg_*``).

Each mutant is one change, written as the text the switched region has in the mutant: a mutated
expression (``form == "expr"``, the site is the expression) or one statement run after the
original statement (``form == "stmt"``, the site is the statement).

Each mutant has two names. ``id`` (``file:line:col:kind:variant``) says where it is, for people;
it changes when a line is added or removed above it. ``key`` (``file:digest:kind:variant``) says
what it is: the digest is taken over the text of its line and of its site (whitespace
normalised) and its occurrence among the file's mutants with the same line, site and change, so
the key stays the same whatever happens to the rest of the file, and changes only when its own
line or statement does. Sampling and the equivalents list go by ``key``.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cosim.mutation.verilog_tokens import (CLOSERS, OPENERS, Token, TokenError, line_of, matching, number_text,
                                           number_value, tokenize)

# operator -> (its replacement, the operator kind reported)
SWAPS = {"+": ("-", "arith"), "-": ("+", "arith"),
         "&": ("|", "bitwise"), "|": ("&", "bitwise"),
         "&&": ("||", "logical"), "||": ("&&", "logical"),
         "==": ("!=", "equality"), "!=": ("==", "equality"),
         "<": ("<=", "relational"), "<=": ("<", "relational"),
         ">": (">=", "relational"), ">=": (">", "relational")}
KINDS = ("arith", "bitwise", "logical", "equality", "relational", "invert_dropped", "ternary_swap", "constant",
         "condition_negated", "and_term_dropped", "stuck_bit")
# Statement keywords whose parenthesised header holds no mutation point (loop control, events, case subject).
_HEADER_KWS = {"for", "while", "repeat", "case", "casez", "casex", "@", "#"}
# Declarations (skipped to their `;`): nothing in them is logic.
_DECL_KWS = {"localparam", "parameter", "input", "output", "inout", "reg", "integer", "genvar", "real", "time",
             "defparam", "specparam"}
_OPERAND_END = {")", "]", "}"}


class MutationError(ValueError):
    """The RTL could not be scanned for mutation points."""


@dataclass(frozen=True)
class Mutant:
    """One mutant: where (file, line, module), what kind, the change in words, and its text."""

    id: str          # stable name: file:line:col:kind:variant
    file: str        # file name inside the RTL folder
    module: str
    line: int
    kind: str        # one of KINDS
    change: str      # `before` -> `after`, for people
    form: str        # "expr": `text` replaces the site; "stmt": `text` is a statement run after the site
    start: int       # character span of the site in the file
    end: int
    text: str
    key: str = ""    # stable name: file:digest:kind:variant (see the module's docstring)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class _Decl:
    width: int | None   # bits when the range is [N:0] with a literal N (integer: 32); None when unknown
    vector: bool        # declared with a range (a bit select is legal)
    is_reg: bool        # a variable (reg/integer), not a net
    memory: bool        # an array: no whole-name stuck bit


def _snippet(s: str, limit: int = 70) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _rmatch(tokens: list[Token], j: int) -> int:
    """The index of the opener matching the closer at ``j`` (scanning backwards)."""
    depth = 0
    for k in range(j, -1, -1):
        t = tokens[k].text
        if t in CLOSERS:
            depth += 1
        elif t in OPENERS:
            depth -= 1
            if depth == 0:
                return k
    raise TokenError(f"unbalanced {tokens[j].text!r} at offset {tokens[j].start}")


def _decls(tokens: list[Token], lo: int, hi: int) -> dict[str, _Decl]:
    """Names declared reg/integer/wire (ports included) in tokens[lo:hi], with what a stuck bit needs."""
    out: dict[str, _Decl] = {}
    i = lo
    while i < hi:
        t = tokens[i].text
        if t in ("reg", "integer", "wire"):
            is_reg = t != "wire"
            j = i + 1
            width: int | None = 32 if t == "integer" else None
            vector = t == "integer"
            if j < hi and tokens[j].text == "signed":
                j += 1
            if j < hi and tokens[j].text == "[":
                k = matching(tokens, j)
                rng = [x.text for x in tokens[j + 1:k]]
                vector = True
                if len(rng) == 3 and rng[1] == ":" and rng[2] == "0" and rng[0].isdigit():
                    width = int(rng[0]) + 1
                j = k + 1
            # names until the declaration ends (`;`, or the next port in an ANSI header)
            while j < hi and tokens[j].text not in (";", ")", "input", "output", "inout"):
                if tokens[j].kind == "ident":
                    mem = j + 1 < hi and tokens[j + 1].text == "["
                    out[tokens[j].text] = _Decl(width, vector, is_reg, mem)
                    if j + 1 < hi and tokens[j + 1].text == "=":  # an initialiser: skip to its end
                        depth = 0
                        while j < hi and not (depth == 0 and tokens[j].text in (",", ";")):
                            depth += (tokens[j].text in OPENERS) - (tokens[j].text in CLOSERS)
                            j += 1
                        continue
                    if mem:
                        j = matching(tokens, j + 1)
                j += 1
            i = j
        else:
            i += 1
    return out


class _Scanner:
    """Finds the mutants of one module (tokens[lo:hi] is the module body)."""

    def __init__(self, file: str, text: str, tokens: list[Token], module: str, decls: dict[str, _Decl]):
        self.file, self.text, self.tokens, self.module, self.decls = file, text, tokens, module, decls
        self.seen: dict[str, int] = {}  # statement text -> how many times a stuck bit was chosen for it
        self.out: list[Mutant] = []

    # ---- helpers
    def _add(self, anchor: Token, kind: str, variant: str, change: str, form: str, start: int, end: int,
             text: str) -> None:
        line = line_of(self.text, anchor.start)
        col = anchor.start - (self.text.rfind("\n", 0, anchor.start) + 1) + 1
        self.out.append(Mutant(f"{self.file}:{line}:{col}:{kind}:{variant}", self.file, self.module, line, kind,
                               change, form, start, end, text))

    def _site_text(self, start: int, end: int, edits: list[tuple[int, int, str]]) -> str:
        """The site's text with character-span edits applied."""
        s = self.text[start:end]
        for a, b, new in sorted(edits, reverse=True):
            s = s[:a - start] + new + s[b - start:]
        return s

    # ---- expressions
    def expression(self, a: int, b: int, cond: bool) -> None:
        """Mutants of the expression tokens[a:b] (an if condition when ``cond``)."""
        toks = self.tokens
        if a >= b:
            return
        start, end = toks[a].start, toks[b - 1].end
        orig = self.text[start:end]
        # Constant expressions stay as they are: indices and part-select bounds ([...]) and
        # replication counts (a mutant there is a width change, or not Verilog at all).
        const: set[int] = set()
        for i in range(a, b):
            t = toks[i]
            if t.text == "[":
                const.update(range(i, matching(toks, i) + 1))
            elif t.text == "{":
                k, depth = i + 1, 0
                while k < b:
                    x = toks[k].text
                    if depth == 0 and x in (",", "}"):
                        break
                    if depth == 0 and x == "{":
                        const.update(range(i + 1, k))
                        break
                    depth += (x in OPENERS) - (x in CLOSERS)
                    k += 1
        for i in range(a, b):
            t = toks[i]
            if i in const:
                continue
            prev = toks[i - 1] if i > a else None
            binary = prev is not None and (prev.kind in ("number", "ident", "directive") or prev.text in _OPERAND_END)
            if t.text in SWAPS and binary:
                new, kind = SWAPS[t.text]
                self._add(t, kind, f"{t.text}>{new}", f"`{_snippet(orig)}`: `{t.text}` -> `{new}`", "expr",
                          start, end, self._site_text(start, end, [(t.start, t.end, new)]))
            elif t.text in ("~", "!"):
                self._add(t, "invert_dropped", f"{t.text}drop", f"`{_snippet(orig)}`: `{t.text}` dropped", "expr",
                          start, end, self._site_text(start, end, [(t.start, t.end, " ")]))
            elif t.text == "?":
                self._ternary(a, b, i, start, end, orig)
            elif t.kind == "number":
                self._constant(t, start, end, orig)
        self._and_terms(a, b, start, end, orig)
        if cond:
            self._add(toks[a], "condition_negated", "not", f"`if ({_snippet(orig)})` -> `if (!(...))`", "expr",
                      start, end, f"!({orig})")

    def _ternary(self, a: int, b: int, q: int, start: int, end: int, orig: str) -> None:
        toks = self.tokens
        depth, nest, colon = 0, 0, None
        for k in range(q + 1, b):
            x = toks[k].text
            if x in OPENERS:
                depth += 1
            elif x in CLOSERS:
                depth -= 1
            elif depth == 0 and x == "?":
                nest += 1
            elif depth == 0 and x == ":":
                if nest == 0:
                    colon = k
                    break
                nest -= 1
        if colon is None:
            return
        depth, nest, stop = 0, 0, b
        for k in range(colon + 1, b):
            x = toks[k].text
            if x in OPENERS:
                depth += 1
            elif x in CLOSERS:
                if depth == 0:
                    stop = k
                    break
                depth -= 1
            elif depth == 0 and x == "?":
                nest += 1
            elif depth == 0 and x == ":":
                if nest == 0:
                    stop = k
                    break
                nest -= 1
            elif depth == 0 and x in (",", ";"):
                stop = k
                break
        if colon == q + 1 or stop == colon + 1:
            return
        then_s, then_e = toks[q + 1].start, toks[colon - 1].end
        else_s, else_e = toks[colon + 1].start, toks[stop - 1].end
        new = f"({self.text[else_s:else_e]}) : ({self.text[then_s:then_e]})"
        self._add(toks[q], "ternary_swap", "swap", f"`{_snippet(orig)}`: `?:` arms swapped", "expr", start, end,
                  self._site_text(start, end, [(then_s, else_e, new)]))

    def _constant(self, t: Token, start: int, end: int, orig: str) -> None:
        v = number_value(t.text)
        if v is None:
            return
        size, signed, value = v
        unsized_dec = t.text.replace("_", "").isdigit()
        limit = (1 << (size - 1 if signed else size)) - 1 if size else (1 << 31) - 1
        new_v = value + 1 if value + 1 <= limit else value - 1
        new = number_text(size, signed, new_v, unsized_dec)
        self._add(t, "constant", f"{t.text}>{new}", f"`{_snippet(orig)}`: `{t.text}` -> `{new}`", "expr",
                  start, end, self._site_text(start, end, [(t.start, t.end, new)]))

    def _and_terms(self, a: int, b: int, start: int, end: int, orig: str) -> None:
        """Drop one term of each `x && y && ...` chain (a parenthesised group or the whole expression)."""
        toks = self.tokens
        groups = [(a, b)] + [(i + 1, matching(toks, i)) for i in range(a, b) if toks[i].text == "("]
        for g0, g1 in groups:
            depth, cuts, ok = 0, [], True
            for k in range(g0, g1):
                x = toks[k].text
                if x in OPENERS:
                    depth += 1
                elif x in CLOSERS:
                    depth -= 1
                elif depth == 0 and x in ("||", "?", ":", ",", ";"):
                    ok = False
                    break
                elif depth == 0 and x == "&&":
                    cuts.append(k)
            if not ok or not cuts:
                continue
            bounds = [g0] + [c + 1 for c in cuts]
            ends = cuts + [g1]
            terms = [self.text[toks[s].start:toks[e - 1].end] for s, e in zip(bounds, ends)]
            for m in range(len(terms)):
                rest = [t for n, t in enumerate(terms) if n != m]
                new = " && ".join(f"({t})" for t in rest) if len(rest) > 1 else f"|({rest[0]})"
                self._add(toks[bounds[m]], "and_term_dropped", f"drop{m}",
                          f"`{_snippet(orig)}`: term `{_snippet(terms[m], 40)}` dropped", "expr", start, end,
                          self._site_text(start, end, [(toks[g0].start, toks[g1 - 1].end, new)]))

    # ---- statements
    def stuck(self, lhs: int, op: int, semi: int, procedural: bool, rhs: tuple[int, int]) -> None:
        """A stuck bit of the assigned signal (a plain name, no select)."""
        toks = self.tokens
        if op - lhs != 1 or toks[lhs].kind != "ident":
            return
        name = toks[lhs].text
        d = self.decls.get(name)
        if d is None or d.memory:
            return
        if all(t.kind in ("number", "directive", "op") or (t.kind == "ident" and t.text.isupper())
               for t in toks[rhs[0]:rhs[1]]):
            # a constant assigned (literals, macros, parameters): the constant mutants cover it, and
            # a stuck value equal to the constant's bit would be no change at all
            return
        # one stuck value per statement, chosen from the statement's own text (and which repeat of it this
        # is), so an edit elsewhere in the file does not change it: half the mutants of both
        stmt = self.text[toks[lhs].start:toks[semi].end]
        nth = self.seen.get(stmt, 0)
        self.seen[stmt] = nth + 1
        seed = zlib.crc32(f"{self.file}:{stmt}:{nth}".encode())
        v = seed & 1
        if procedural and d.is_reg:
            bit = (seed >> 1) % d.width if d.width else 0
            target = f"{name}[{bit}]" if d.vector else name
            s, e = toks[lhs].start, toks[semi].end
            self._add(toks[lhs], "stuck_bit", f"{target}={v}", f"`{target}` stuck at {v} after "
                      f"`{_snippet(self.text[s:e], 50)}`", "stmt", s, e, f"{target} {toks[op].text} 1'b{v};")
        elif not procedural and not d.vector and rhs[0] < rhs[1]:
            s, e = toks[rhs[0]].start, toks[rhs[1] - 1].end
            self._add(toks[lhs], "stuck_bit", f"{name}={v}", f"`{name}` stuck at {v}", "expr", s, e, f"1'b{v}")


def _skip_to(tokens: list[Token], i: int, hi: int, stops: tuple[str, ...]) -> int:
    """The index of the first of ``stops`` at bracket depth 0 from ``i``."""
    depth = 0
    while i < hi:
        x = tokens[i].text
        if depth == 0 and x in stops:
            return i
        depth += (x in OPENERS) - (x in CLOSERS)
        i += 1
    return hi


def module_headers(tokens: list[Token]) -> list[tuple[str, int, int]]:
    """(name, index of the header's closing `;`, index of `endmodule`) of each module."""
    out = []
    i = 0
    while i < len(tokens):
        if tokens[i].text == "module":
            name = tokens[i + 1].text
            semi = _skip_to(tokens, i + 2, len(tokens), (";",))
            end = next((k for k in range(semi, len(tokens)) if tokens[k].text == "endmodule"), None)
            if end is None:
                raise MutationError(f"module {name}: no endmodule")
            out.append((name, semi, end))
            i = end
        i += 1
    return out


def _norm(s: str) -> str:
    return " ".join(s.split())


def with_keys(text: str, mutants: list[Mutant]) -> list[Mutant]:
    """``mutants`` (of one file whose source is ``text``, in source order) with their stable ``key``:
    a digest of the mutant's line, its site and its occurrence among the same (line, site, change)."""
    lines = text.splitlines()
    seen: dict[tuple[str, ...], int] = {}
    out = []
    for m in mutants:
        variant = m.id.split(":", 4)[4]
        what = (_norm(lines[m.line - 1]), _norm(text[m.start:m.end]), m.kind, variant)
        nth = seen.get(what, 0)
        seen[what] = nth + 1
        digest = hashlib.sha256("\0".join(what + (str(nth),)).encode()).hexdigest()[:10]
        out.append(replace(m, key=f"{m.file}:{digest}:{m.kind}:{variant}"))
    return out


def scan_file(path: Path) -> list[Mutant]:
    """Every mutant of one Verilog file, in source order, each with its stable key."""
    text = path.read_text()
    try:
        tokens = tokenize(text, path.name)
        out: list[Mutant] = []
        for name, semi, end in module_headers(tokens):
            start = next(k for k in range(len(tokens)) if tokens[k].text == "module" and tokens[k + 1].text == name)
            sc = _Scanner(path.name, text, tokens, name, _decls(tokens, start, end))
            _scan_body(sc, semi + 1, end)
            out += sc.out
    except TokenError as e:
        raise MutationError(f"{path}: {e}") from None
    return with_keys(text, out)


def _scan_body(sc: _Scanner, lo: int, hi: int) -> None:
    toks = sc.tokens
    proc_depth, pending_proc, in_func, ifdef = 0, False, False, 0
    i = lo
    while i < hi:
        t = toks[i]
        x = t.text
        procedural = proc_depth > 0 or in_func
        if t.kind == "directive":
            if x in ("`ifdef", "`ifndef"):
                ifdef += 1
                i += 2
                continue
            if x == "`endif":
                ifdef -= 1
            elif x == "`include":
                i += 1
        elif x in _DECL_KWS:
            i = _skip_to(toks, i, hi, (";",)) + 1
            continue
        elif x in ("always", "initial"):
            pending_proc = True
        elif x == "function":
            in_func = True
        elif x == "endfunction":
            in_func = False
        elif x == "begin" and (pending_proc or proc_depth > 0):
            proc_depth += 1
            pending_proc = False
        elif x == "end" and proc_depth > 0:
            proc_depth -= 1
        elif x == "if" and procedural and i + 1 < hi and toks[i + 1].text == "(":
            k = matching(toks, i + 1)
            if ifdef == 0:
                sc.expression(i + 2, k, cond=True)
            i = k + 1
            continue
        elif x in _HEADER_KWS or x in ("(", "(*"):
            k = i + 1 if x in _HEADER_KWS else i
            if k < hi and toks[k].text in ("(", "(*"):
                i = matching(toks, k) + 1
                continue
        elif x in ("=", "<="):
            rhs_end = _skip_to(toks, i + 1, hi, (";", ","))
            lhs = i - 1
            while lhs > lo and toks[lhs].text == "]":
                lhs = _rmatch(toks, lhs) - 1
            if toks[lhs].text == "}":
                lhs = _rmatch(toks, lhs)
            name = toks[lhs].text
            hier = toks[lhs - 1].text == "."
            cont = toks[lhs - 1].text in ("assign", "wire") or (toks[lhs - 1].text == "]" and not procedural)
            if ifdef == 0 and not hier and not name.startswith("dbg_") and (procedural or cont):
                sc.expression(i + 1, rhs_end, cond=False)
                if toks[rhs_end].text == ";":
                    sc.stuck(lhs, i, rhs_end, procedural, (i + 1, rhs_end))
            i = rhs_end + 1
            continue
        i += 1


def design_modules(files: list[Path], top: str) -> set[str]:
    """The modules instantiated under ``top`` (``top`` included), found by name in each module's body."""
    bodies: dict[str, set[str]] = {}
    for f in files:
        tokens = tokenize(f.read_text(), f.name)
        for name, semi, end in module_headers(tokens):
            bodies[name] = {t.text for t in tokens[semi:end] if t.kind == "ident"}
    seen, todo = set(), [top]
    while todo:
        m = todo.pop()
        if m in seen or m not in bodies:
            continue
        seen.add(m)
        todo += [n for n in bodies[m] if n in bodies]
    return seen


def scan_rtl(rtl_dir: Path, top: str = "accel_top") -> list[Mutant]:
    """Every mutant of the modules of the design under ``top`` (``sources.txt`` order). A module
    outside the hierarchy (a spare block with only its own unit bench) has no mutants: no run of
    the accelerator could tell them apart."""
    from hw.introspect.parse import source_files

    files = source_files(rtl_dir)
    keep = design_modules(files, top)
    out: list[Mutant] = []
    for f in files:
        out += [m for m in scan_file(f) if m.module in keep]
    return out
