"""What a shipped network is: the :class:`Network` record the registry (:data:`compiler.networks.NETWORKS`) holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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
    * ``input_name`` / ``output_name``: the graph's input and output (the logits) names.
    """

    name: str
    description: str
    graph: Callable[[], Graph]
    dataset: Callable[[str], tuple[np.ndarray, np.ndarray]]
    float_predict: Callable[[np.ndarray], np.ndarray] | None
    input_name: str
    output_name: str
