"""A shipped network (``compiler.networks.NETWORKS``) on the models: one Program for a batch of the
test split's images, the logits of every model against the plain numpy reference, accuracies,
cycles and the per-layer report. ``cosim net`` prints it; ``cosim sim`` and ``cosim bench`` use
:func:`make_net_case` for their network rows.

What runs: the reference (``compiler.graph_reference.run_reference``, plain numpy integer
inference written from the layer definitions), the golden path (the network kernel on numpy,
``NetworkProgram.run_golden``), the TLM (traced: ``cosim.section_report`` splits its run by layer)
and the RTL (one simulator process). Every model's int8 logits must equal the reference's bit for
bit (``match``); each model's accuracy is its argmax against the labels, next to the float
model's on the same images.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hw.config import HwConfig
from cosim import models
from cosim.cli import UserError
from cosim.section_report import SectionReport, section_report

NET_MODELS = ("golden", "iss", "tlm", "rtl")


def network_names() -> list[str]:
    """The shipped networks' names."""
    from compiler.networks import NETWORKS

    return list(NETWORKS)


# What a user graph's or ONNX model's (cosim.onnx_run) description says of its samples without --input.
RANDOM_SAMPLES_TEXT = ("seeded random int8 inputs", "seeded random inputs")
# Samples a user graph without a data set is run on (seeded random int8 of its input shape).
RANDOM_SAMPLES = 64


def get_network(name: str, seed: int = 0) -> Any:
    """The ``compiler.networks.Network`` called ``name``, or the user network of ``path.py:function``
    (:func:`user_network`); UserError (one line) if there is none."""
    from compiler.networks import NETWORKS

    if ":" in name and name.split(":", 1)[0].endswith(".py"):
        return user_network(name, seed)
    if name.endswith(".onnx"):
        from cosim.onnx_run import onnx_network

        return onnx_network(name, seed)
    if name not in NETWORKS:
        raise UserError(f"unknown network '{name}' (networks: {', '.join(NETWORKS)}; or your own as path.py:function)")
    return NETWORKS[name]


def user_network(spec: str, seed: int = 0) -> Any:
    """The network a user file builds: ``path.py:function`` names a function of no arguments returning a
    ``compiler.networks.Network`` (with its data set, labels and float model) or a ``compiler.graph.Graph``
    of one input and one output. A graph's samples are :data:`RANDOM_SAMPLES` seeded random int8 inputs
    (no labels, so no accuracy), unless ``cosim net --input`` gives them."""
    from compiler.examples import load_user_object
    from compiler.graph import Graph
    from compiler.kernel import reporting_failures
    from compiler.networks.network import Network

    obj, _mod, fn = load_user_object(spec, "network")
    path = spec.rsplit(":", 1)[0]
    if obj is None or not callable(obj) or isinstance(obj, type):
        raise UserError(f"{path}: defines no function '{fn}' (it must return a Graph or a Network)")
    with reporting_failures(obj, f"network '{fn}'"):
        built = obj()
    if isinstance(built, Network):
        return built
    if not isinstance(built, Graph):
        if inspect.iscoroutine(built):  # an async def: closed, so no warning that it was never awaited
            built.close()
        raise UserError(f"{spec}: returned {type(built).__name__}, not a compiler.graph.Graph or a "
                        f"compiler.networks.Network")
    built.check()
    if len(built.inputs) != 1 or len(built.outputs) != 1:
        raise UserError(f"{spec}: graph '{built.name}' has {len(built.inputs)} input(s) and {len(built.outputs)} "
                        f"output(s); cosim net runs graphs of one input and one output")
    g, inp, out = built, built.inputs[0], built.outputs[0]
    samples = SeededSamples(tuple(inp.shape), seed)
    return Network(name=g.name, description=f"graph '{g.name}' from {spec} ({RANDOM_SAMPLES_TEXT[0]})",
                   graph=lambda: g, dataset=lambda split: (samples, None), float_predict=None,
                   input_name=inp.name, output=out.name)


class SeededSamples:
    """:data:`RANDOM_SAMPLES` seeded random int8 samples of ``shape``, drawn one sample at a time when first
    sliced, and only as many as asked for: a user graph's stand-in for a data set (``--input`` may replace
    it unseen, and ``--images 1`` of a big input needs one). The values are those of one draw of them all
    (``default_rng(seed).integers(-128, 128, (RANDOM_SAMPLES, *shape))``)."""

    dtype = np.dtype(np.int8)

    def __init__(self, shape: tuple[int, ...], seed: int):
        self.shape = (RANDOM_SAMPLES, *shape)
        self._rng = np.random.default_rng(seed)
        self._made: list[np.ndarray] = []

    def __len__(self) -> int:
        return RANDOM_SAMPLES

    def _first(self, n: int) -> np.ndarray:
        while len(self._made) < n:
            self._made.append(self._rng.integers(-128, 128, size=self.shape[1:]).astype(np.int8))
        out = np.stack(self._made[:n]) if n else np.zeros((0, *self.shape[1:]), np.int8)
        out.flags.writeable = False
        return out

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            idx = range(*key.indices(RANDOM_SAMPLES))
            return self._first(max(idx) + 1 if idx else 0)[key]
        return self._first(RANDOM_SAMPLES)[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self._first(RANDOM_SAMPLES)
        return a if dtype is None else a.astype(dtype)


def draws_random_samples(network: Any) -> bool:
    """Whether ``network`` runs seeded random samples (a user graph, an ONNX model), which ``--seed`` draws."""
    return any(phrase in network.description for phrase in RANDOM_SAMPLES_TEXT)


def with_samples_from(network: Any, source: str) -> Any:
    """``network`` whose description names ``source`` (``--input``) instead of seeded random samples."""
    import dataclasses

    text = network.description
    for phrase in RANDOM_SAMPLES_TEXT:
        text = text.replace(phrase, f"samples from {source}")
    return dataclasses.replace(network, description=text)


def load_inputs(text: str, network: Any) -> np.ndarray:
    """``--input FILE.npy`` or ``FILE.npz[:NAME]``: int8 samples ``(N, *input shape)`` (one sample may omit
    the N)."""
    from compiler.params import ParamError, load_tensor_file

    try:
        a = load_tensor_file(text, "--input", mark="").array
    except ParamError as e:
        raise UserError(str(e).replace("param '--input': ", "--input: ")) from None
    shape = tuple(network.graph().inputs[0].shape) if network.graph is not None else \
        tuple(network.dataset("test")[0].shape[1:])
    if tuple(a.shape) == shape:
        a = a[None]
    if a.dtype != np.int8 or tuple(a.shape[1:]) != shape:
        raise UserError(f"--input {text}: {a.dtype} {a.shape}, the network's input '{network.input_name}' takes int8 "
                        f"samples of shape (N, {', '.join(map(str, shape))})")
    return a


@dataclass
class NetCase:
    """One network compiled for ``images`` images of its test split, with the reference logits."""

    network: Any                 # compiler.networks.Network
    config: HwConfig
    net: Any                     # compiler.network.NetworkProgram (the Program is net.program)
    images: np.ndarray           # int8, the graph input's layout, (N, ...)
    labels: np.ndarray | None    # int64 (N,); None for samples without labels (no accuracy)
    reference: np.ndarray        # logits (N, classes) of compiler.graph_reference (int8) or the network's own
    compile_s: float
    reference_s: float

    @property
    def program(self) -> Any:
        return self.net.program

    @property
    def batch(self) -> int:
        return len(self.images)

    def inputs(self) -> dict[str, np.ndarray]:
        return {self.network.input_name: self.images}

    def logits(self, outputs: dict[str, np.ndarray]) -> np.ndarray:
        """The natural ``(N, classes)`` int8 logits of a run's output regions (``RunResult.outputs``)."""
        return self.net.outputs(outputs)[self.network.output_name]

    def mismatch(self, logits: np.ndarray) -> str | None:
        """None when ``logits`` equal the reference bit for bit, else where they first differ."""
        mm = models.first_mismatch({"logits": self.reference}, {"logits": logits})
        if mm is None:
            return None
        if not mm.index:
            return str(mm)
        return (f"image {mm.index[0]}, logit {mm.index[1]}: reference {mm.expected}, got {mm.got} "
                f"({mm.count} logit(s) differ)")

    def accuracy(self, logits: np.ndarray) -> float | None:
        """The share of images whose largest logit (the first, on a tie) is the label (None without labels)."""
        if self.labels is None:
            return None
        return float(np.mean(np.argmax(logits, axis=1) == self.labels))

    def float_accuracy(self) -> float | None:
        """The float model's accuracy on the same images (None without labels or a float model)."""
        if self.labels is None or self.network.float_predict is None:
            return None
        return float(np.mean(self.network.float_predict(self.images) == self.labels))


def count_test_images(network: Any, data: np.ndarray | None = None) -> int:
    """How many images ``network``'s test split (or the samples ``data``) has."""
    return len(data if data is not None else network.dataset("test")[0])


def make_net_case(network: Any, cfg: HwConfig, images: int, data: np.ndarray | None = None) -> NetCase:
    """Compile ``network`` for its first ``images`` test images (or samples of ``data``, without labels) as
    ONE Program (batch = images), attach the images, and compute the reference logits."""
    from compiler.graph_reference import run_reference
    from compiler.network import compile_network

    labels: np.ndarray | None
    if data is None:
        data, labels = network.dataset("test")
    else:
        labels = None
    if not 1 <= images <= len(data):
        raise UserError(f"--images {images}: network '{network.name}' has {len(data)} samples "
                        f"(give 1..{len(data)})")
    t0 = time.perf_counter()
    if network.compile is not None:  # a model the graph cannot express compiles itself
        net = network.compile(cfg, images, f"net_{network.name}")
    else:
        net = compile_network(network.graph(), cfg, batch=images, name=f"net_{network.name}")
    t1 = time.perf_counter()
    x = np.asarray(data[:images])  # after the compile, which refuses inputs the DRAM cannot hold
    y = None if labels is None else np.asarray(labels[:images])
    net.set_inputs({network.input_name: x})
    ref = network.reference(x) if network.compile is not None else \
        run_reference(network.graph(), {network.input_name: x})[network.output_name]
    t2 = time.perf_counter()
    return NetCase(network, cfg, net, x, y, ref, t1 - t0, t2 - t1)


def run_network(case: NetCase, chosen: list[str], trace: str | Path | None = None, mem: str = "fast",
                simulator: str = "verilator") -> tuple[dict[str, Any], SectionReport | None]:
    """Run ``case`` on the ``chosen`` models (of :data:`NET_MODELS`); return the report (the JSON of
    ``cosim net``) and the per-layer :class:`SectionReport` (None without a TLM run). The TLM runs
    whenever the TLM or the RTL is chosen: its traced run gives the per-layer table (cycle-exact to
    the RTL, whose totals are checked against it)."""
    prog = case.program
    rep: dict[str, Any] = {
        "network": case.network.name, "config": case.config.name, "images": case.batch, "models": chosen,
        "program": {"name": prog.name, "insns": len(prog.insns),
                    **({"cores": [count for _, count in prog.windows]} if prog.num_cores > 1 else {})},
        "accuracy": {"float": case.float_accuracy(), "reference": case.accuracy(case.reference)},
        "mismatch": {}, "errors": {}, "cycles": {},
        "wall_s": {"compile": case.compile_s, "reference": case.reference_s},
    }
    logits: dict[str, np.ndarray] = {}
    if "golden" in chosen:
        t0 = time.perf_counter()
        logits["golden"] = case.net.run_golden(case.inputs())[case.network.output_name]
        rep["wall_s"]["golden"] = time.perf_counter() - t0
    if "iss" in chosen:
        r = models.iss(prog)
        rep["wall_s"]["iss"] = r.wall_s
        if r.error:
            rep["errors"]["iss"] = r.error
        logits["iss"] = case.logits(r.outputs)
        rep.setdefault("counters", {})["iss"] = r.counters
        if "cores" in r.extra:
            rep.setdefault("cores", {})["iss"] = r.extra["cores"]
    timeline = None
    sr: SectionReport | None = None
    if "tlm" in chosen or "rtl" in chosen:
        timeline = models.tlm_traced(prog, trace=trace)
        res = timeline.result
        rep["wall_s"]["tlm"] = res.wall_s
        if res.error:
            rep["errors"]["tlm"] = res.error
        if "tlm" in chosen:
            logits["tlm"] = case.logits(res.outputs)
        rep["cycles"]["tlm"] = res.cycles
        rep.setdefault("counters", {})["tlm"] = res.counters
        if "cores" in res.extra:
            rep.setdefault("cores", {})["tlm"] = res.extra["cores"]
    if "rtl" in chosen:
        why = models.rtl_available()
        if why:
            raise UserError(f"the RTL cannot run here: {why}")
        t0 = time.perf_counter()
        r = models.rtl([prog], case.config, mem=mem, sim=simulator)[0]
        rep["wall_s"]["rtl"] = r.wall_s or (time.perf_counter() - t0)
        rep["cycles"]["rtl"] = r.cycles
        rep.setdefault("counters", {})["rtl"] = r.counters
        if "cores" in r.extra:
            rep.setdefault("cores", {})["rtl"] = r.extra["cores"]
        if r.error:
            rep["errors"]["rtl"] = r.error
        logits["rtl"] = case.logits(r.outputs)
        if timeline is not None and mem == "protocol":
            rep["cycles"]["timing_note"] = models.PROTOCOL_NOTE
        elif timeline is not None:
            t = timeline.result
            diff = [c for c in t.counters if c in r.counters and t.counters[c] != r.counters[c]]
            rep["cycles"]["tlm_equals_rtl"] = t.cycles == r.cycles and not diff
            if diff:
                rep["cycles"]["counters_differ"] = {c: {"tlm": t.counters[c], "rtl": r.counters[c]} for c in diff}
    for m, lg in logits.items():
        if m in rep["errors"]:
            rep["mismatch"][m] = f"the run failed: {rep['errors'][m].get('name')}"
            continue
        mm = case.mismatch(lg)
        if mm:
            rep["mismatch"][m] = mm
        rep["accuracy"][m] = case.accuracy(lg)
    total = rep["cycles"].get("rtl") or rep["cycles"].get("tlm")
    if total:
        rep["cycles"]["total"] = total
        rep["cycles"]["per_image"] = total / case.batch
    if timeline is not None and prog.num_cores > 1:
        rep["layers_note"] = "no per-layer table on several cores (the layers of the cores overlap in time)"
    elif timeline is not None:
        sr = section_report(prog, timeline)
        j = sr.to_json()
        rep["layers"] = j["sections"]
        rep["outside_layers"] = j["outside"]
        rep["layer_cycles_sum"] = sum(row["cycles"] for row in j["sections"])
        rep["layers_match_counters"] = not sr.mismatches()
        if sr.mismatches():
            rep["layer_sum_problems"] = sr.mismatches()
        rep["macs"] = j["macs"]
        rep["macs_per_cycle"] = j["macs_per_cycle"]
        rep["peak_macs_per_cycle"] = j["peak_macs_per_cycle"]
        fused = {ly["name"]: ly for ly in prog.meta.get("network", {}).get("layers", [])}
        for row in rep["layers"]:
            ly = fused.get(row["name"])
            if ly is not None:
                row["op"], row["fused"] = ly["op"], ly["fused"]
    if trace is not None and timeline is not None:
        rep["trace"] = str(Path(trace).resolve())
    rep["dram"] = prog.meta.get("network", {}).get("dram", {})
    rep["match"] = not rep["mismatch"] and bool(logits)
    return rep, sr


def golden_result(case: NetCase) -> Any:
    """The golden path's run as a ``RunResult`` whose output is the natural logits (``"logits"``)."""
    from hw.result import RunResult

    t0 = time.perf_counter()
    logits = case.net.run_golden(case.inputs())[case.network.output_name]
    return RunResult("golden", {"logits": logits}, wall_s=time.perf_counter() - t0)


def judge_net(case: NetCase, res: Any, label: str) -> dict[str, Any]:
    """The report of one model's run of ``case`` in the shape of ``cosim.models.judge``'s (``match``
    against the reference logits, ``accuracy`` besides); ``label`` names the row (``net:NAME``).
    The golden result carries natural logits (:func:`golden_result`), a model's its output regions."""
    d: dict[str, Any] = {"kernel": label, "config": case.config.name}
    d.update(res.to_json())
    if res.error:
        d["match"] = False
        return d
    logits = res.outputs["logits"] if res.model == "golden" else case.logits(res.outputs)
    mm = case.mismatch(logits)
    d["match"] = mm is None
    if mm:
        d["mismatch"] = mm
    d["accuracy"] = case.accuracy(logits)
    return d
