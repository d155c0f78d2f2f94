"""Where the console draws lag and rebalances: pixels checked against the samples."""

from __future__ import annotations

import pytest

from herdless.console.plot import lag_plot, nice_ceiling, rebalance_strip


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (1, 1), (3, 5), (18, 20), (25, 50), (100, 100), (101, 200)]
)
def test_the_axis_ends_at_a_round_number(value: int, ceiling: int) -> None:
    assert nice_ceiling(value) == ceiling


def test_samples_span_the_plot_from_left_to_right_and_zero_to_the_axis_top() -> None:
    plot = lag_plot([(100.0, 0), (110.0, 10), (120.0, 20)], width=300, height=100)
    (x0, y0), (x1, y1), (x2, y2) = plot.points
    assert (x0, y0) == (plot.left, plot.bottom)  # the first sample, lag 0
    assert (x2, y2) == (plot.right, plot.top)  # the last, at the axis top (20)
    assert x1 == pytest.approx((plot.left + plot.right) / 2)
    assert y1 == pytest.approx((plot.top + plot.bottom) / 2)
    assert [t.label for t in plot.y_ticks] == ["0", "10", "20"]
    assert [t.label for t in plot.x_ticks] == ["00:01:40", "00:01:50", "00:02:00"]
    assert plot.polyline.split() == [f"{x:.1f},{y:.1f}" for x, y in plot.points]


def test_a_single_sample_and_none_draw_without_failing() -> None:
    one = lag_plot([(100.0, 7)])
    assert len(one.points) == 1 and one.points[0][0] == one.right
    empty = lag_plot([])
    assert empty.points == () and empty.polyline == "" and empty.area == ""


def test_a_sparkline_has_no_labels() -> None:
    plot = lag_plot([(1.0, 1), (2.0, 2)], width=160, height=32, labels=False)
    assert plot.y_ticks == () and plot.x_ticks == ()
    assert plot.points[-1] == (plot.right, plot.top)


def test_rebalances_are_as_wide_as_they_took_and_never_invisible() -> None:
    entries = [
        {"cause": "member joined", "started_ms": 0, "ended_ms": 5_000},
        {"cause": "member left", "started_ms": 9_000, "ended_ms": 9_001},
    ]
    strip = rebalance_strip(entries, now_ms=10_000, width=1008)
    joined, left = strip.spans
    assert joined.x == 4 and joined.width == pytest.approx(500)
    assert left.x == pytest.approx(904) and left.width == 3  # 1 ms: the minimum sliver
    assert left.cause == "member left" and "took 1 ms" in left.title
    assert rebalance_strip([], now_ms=0).spans == ()
