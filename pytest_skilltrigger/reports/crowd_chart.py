"""The crowd curve (:mod:`.crowd_curve`) as a chart for the results page: recall and
precision against the crowd size, each point with its 95% interval as a bar, and under each
size how the skill was listed there (full, cut, bare). Only geometry here: the template
draws it, escaping every label."""

from __future__ import annotations

from typing import Any

from pytest_skilltrigger.reports.crowd_curve import CrowdCurve

BOX = {"width": 520, "height": 200, "left": 40, "right": 16, "top": 12, "bottom": 44}


def crowd_chart(curve: CrowdCurve) -> dict[str, Any]:
    """One curve's chart: axes, a point per size and measure, the listing under each size."""
    inner_w = BOX["width"] - BOX["left"] - BOX["right"]
    inner_h = BOX["height"] - BOX["top"] - BOX["bottom"]
    count = max(len(curve.points), 1)

    def x(index: int) -> float:
        return round(BOX["left"] + inner_w * (index + 0.5) / count, 1)

    def y(value: float) -> float:
        return round(BOX["top"] + inner_h * (1 - value), 1)

    points, ticks = [], []
    for index, point in enumerate(curve.points):
        size = f"{point.crowd} skills" if point.crowd else "alone"
        ticks.append({"x": x(index), "label": size, "listed": point.listed})
        measures = zip(
            ("recall", "precision"),
            (point.recall, point.precision),
            point.intervals(),
            strict=True,
        )
        for offset, (name, value, interval) in zip((-5, 5), measures, strict=True):
            if value is None or interval is None:
                continue
            points.append(
                {
                    "kind": name,
                    "x": x(index) + offset,
                    "y": y(value),
                    "low": y(interval[0]),
                    "high": y(interval[1]),
                    "label": f"{size}: {name} {value:.0%} ({interval[0]:.0%}–{interval[1]:.0%})",
                }
            )
    on = f" on {curve.model}" if curve.model else ""
    return {
        **BOX,
        "title": f"{curve.skill}{on}",
        "levels": [{"y": y(v), "label": f"{v:.0%}"} for v in (0.0, 0.5, 1.0)],
        "points": points,
        "ticks": ticks,
    }
