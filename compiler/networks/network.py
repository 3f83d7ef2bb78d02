"""What a shipped network is: the :class:`Network` record the registry (:data:`compiler.networks.NETWORKS`) holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from compiler.graph import Graph


@dataclass(frozen=True)
class Network:
    """A shipped network.

    * ``graph()``: the int8 graph (cached: the same object on every call; do not extend it).
    * ``dataset(split)``: ``split`` is ``"test"`` or ``"train"``; returns ``(images, labels)``:
      int8 images in exactly the graph input's layout, ``(N, *input shape)``, and int64 labels
      ``(N,)`` (read-only arrays; labels None for a user graph's unlabelled samples).
    * ``float_predict(images)``: the float model's predicted labels (int64 ``(N,)``) for int8
      images of the graph input's layout, dequantized by the input scale (None: no float model).
    * ``input_name`` / ``output_name``: the graph's input and output (the logits) names; ``output`` is the
      output's name, or a function of no arguments giving it (a graph imported on first use names its
      output only once it is built), and ``output_name`` resolves it.
    * ``min_dram_bytes``: the DRAM the network needs (0: any config's); ``cosim net`` widens a smaller
      config's DRAM to it (:func:`with_dram`), which changes no cycle count.
    * ``summarize(layers, images)``: extra figures from ``cosim net``'s per-layer rows (JSON objects) of a
      batch of ``images``, or None.
    * ``sim_images``: the test images ``cosim sim`` (``make sim``) runs the network on unless told
      otherwise (a network of millions of cycles an image runs on one).
    * ``compile(config, batch, name)``: the network's own compiler, for a model the graph cannot express
      (``graph`` is then None): an object with ``program``, ``set_inputs``, ``outputs`` and ``run_golden``
      as :class:`compiler.network.NetworkProgram` has them; with it, ``reference(images)`` gives the
      reference logits ``(N, classes)``.
    """

    name: str
    description: str
    graph: Callable[[], Graph] | None
    dataset: Callable[[str], tuple[np.ndarray, np.ndarray]]
    float_predict: Callable[[np.ndarray], np.ndarray] | None
    input_name: str
    output: str | Callable[[], str]
    min_dram_bytes: int = 0
    sim_images: int = 4
    summarize: Callable[[list[dict[str, Any]], int], dict[str, Any]] | None = None
    compile: Callable[[Any, int, str], Any] | None = None
    reference: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def output_name(self) -> str:
        """The graph's output (the logits) name."""
        return self.output if isinstance(self.output, str) else self.output()


def with_dram(cfg: Any, dram_bytes: int) -> Any:
    """``cfg`` with a DRAM of at least ``dram_bytes`` (a power of two; the core, buffers and timing
    unchanged, so cycle counts are ``cfg``'s), named ``<name>-dram<N>m`` so that its RTL build is its own."""
    import dataclasses

    if cfg.dram_bytes >= dram_bytes:
        return cfg
    return dataclasses.replace(cfg, name=f"{cfg.name}-dram{dram_bytes >> 20}m", dram_bytes=dram_bytes)
