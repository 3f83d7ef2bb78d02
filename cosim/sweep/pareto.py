"""The Pareto front of points that minimize two numbers (cycles and area).

A point is on the front when no other point is at least as good in both numbers and strictly
better in one; two points with equal numbers are both on it (neither dominates the other).
"""

from __future__ import annotations

from typing import Hashable, Sequence


def pareto_front(points: Sequence[tuple[Hashable, float, float]]) -> list[Hashable]:
    """The keys of the non-dominated ``(key, x, y)`` points (both minimized), by increasing ``x``.

    Sorted by x then y, a point is on the front exactly when its y is below every y seen before
    it, or equal to the front's last point in both numbers: O(n log n)."""
    front: list[Hashable] = []
    best: tuple[float, float] | None = None  # (x, y) of the last point put on the front
    for key, x, y in sorted(points, key=lambda p: (p[1], p[2])):
        if best is None or y < best[1]:
            front.append(key)
            best = (x, y)
        elif (x, y) == best:
            front.append(key)
    return front

