"""Inline SVG charts. Every attribute value and text node is escaped here; only SVG built by this
module is ever inserted as markup, so trace text cannot become an element or an attribute."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# Colour-blind-safe palette (Okabe-Ito); verdicts keep fixed colours across charts.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_STRONG = "#1d2530"
VERDICT_COLOURS = {
    "pass": "#009E73",
    "no_fault": "#009E73",
    "fail": "#D55E00",
    "indeterminate": "#999999",
    "unconfirmed": "#999999",
    "basis_not_in_effect": "#CC79A7",
    "not_indexed": "#0072B2",
    "filtered": "#E69F00",
    "not_retrieved": "#F0E442",
    "dropped_in_context": "#56B4E9",
    "ignored_by_model": "#D55E00",
}


def el(tag: str, attrs: Mapping[str, object] | None = None, *children: object) -> Markup:
    """One element; ``tag`` and attribute names are this module's constants, values are escaped."""
    parts = [f"<{tag}"]
    for key, value in (attrs or {}).items():
        if value is None:
            continue
        parts.append(f' {key}="{escape(str(value))}"')
    parts.append(">")
    for child in children:
        parts.append(str(child) if isinstance(child, Markup) else str(escape(str(child))))
    parts.append(f"</{tag}>")
    # Safe: names are constants of this module and every value and text child went through escape().
    return Markup("".join(parts))  # noqa: S704


def _svg(width: int, height: int, title: str, *children: Markup) -> Markup:
    return el(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width} {height}",
            "width": width,
            "height": height,
            "role": "img",
            "class": "chart",
        },
        el("title", None, title),
        *children,
    )


def _fmt(v: float) -> str:
    return f"{v:.1f}"


@dataclass(frozen=True)
class Bar:
    """One bar: a label, a value and its colour."""

    label: str
    value: float
    colour: str | None = None
    text: str | None = None


def bar_chart(bars: Sequence[Bar], *, title: str, width: int = 560, max_value: float | None = None) -> Markup:
    """Horizontal bars with their values written beside them."""
    row = 22
    label_w = 190
    height = max(1, len(bars)) * row + 10
    top = max([b.value for b in bars] + [max_value or 0.0, 1e-9])
    span = width - label_w - 70
    children: list[Markup] = []
    for i, b in enumerate(bars):
        y = 5 + i * row
        w = 0.0 if top <= 0 else span * max(b.value, 0.0) / top
        colour = b.colour or PALETTE[i % len(PALETTE)]
        children.append(
            el("text", {"x": label_w - 6, "y": _fmt(y + 15), "text-anchor": "end", "class": "lbl"}, b.label)
        )
        children.append(
            el(
                "rect",
                {"x": label_w, "y": y + 3, "width": _fmt(w), "height": row - 6, "fill": colour},
                el("title", None, f"{b.label}: {b.text or _num(b.value)}"),
            )
        )
        children.append(
            el(
                "text",
                {"x": _fmt(label_w + w + 5), "y": _fmt(y + 15), "class": "val"},
                b.text or _num(b.value),
            )
        )
    return _svg(width, height, title, *children)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


@dataclass(frozen=True)
class Marker:
    """A vertical line at one x position, with what changed there."""

    index: int
    text: str


def line_chart(
    series: Mapping[str, Sequence[float | None]],
    x_labels: Sequence[str],
    *,
    title: str,
    markers: Sequence[Marker] = (),
    y_max: float = 1.0,
    width: int = 680,
    height: int = 240,
    percent: bool = True,
    strong: str | None = None,
) -> Markup:
    """Lines over runs (oldest left); a gap where a run has no value; dashed markers where the judge,
    rubric or agent prompt changed, so a judge change is not read as an agent change. The legend gives
    each line's latest value (lines with equal values lie on top of each other); ``strong`` names the
    headline series, drawn dark, thick and on top."""
    left, right, top, bottom = 44, 16, 14, 46
    n = max(len(x_labels), 1)
    plot_w = width - left - right
    plot_h = height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n)

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(v, y_max)) / y_max)

    children: list[Markup] = []
    for k in range(5):
        v = y_max * k / 4
        children.append(
            el("line", {"x1": left, "x2": width - right, "y1": _fmt(y(v)), "y2": _fmt(y(v)), "class": "grid"})
        )
        tick = f"{v * 100:.0f}%" if percent else _num(v)
        children.append(
            el("text", {"x": left - 4, "y": _fmt(y(v) + 4), "text-anchor": "end", "class": "tick"}, tick)
        )
    for i, lab in enumerate(x_labels):
        children.append(
            el(
                "text",
                {"x": _fmt(x(i)), "y": height - bottom + 14, "text-anchor": "middle", "class": "tick"},
                lab,
            )
        )
    for mi, m in enumerate(markers):
        mx = x(m.index) - plot_w / n / 2
        children.append(
            el(
                "line",
                {"x1": _fmt(mx), "x2": _fmt(mx), "y1": top, "y2": top + plot_h, "class": "marker"},
                el("title", None, m.text),
            )
        )
        label = m.text if len(m.text) <= 60 else m.text[:59] + "\u2026"
        # Stagger the labels of neighbouring markers so they do not print over each other.
        ty = top + 10 + 11 * (mi % 3)
        children.append(el("text", {"x": _fmt(mx + 3), "y": ty, "class": "marker-text"}, "\u25b2 " + label))

    # Legend entries flow into rows below the plot; the picture grows by a row when they overflow.
    def fmt(v: float) -> str:
        return _pct(v) if percent else _num(v)

    legends: dict[str, str] = {}
    for name, values in series.items():
        last = next((v for v in reversed(values) if v is not None), None)
        legends[name] = f"{name} {fmt(last)}" if last is not None else f"{name} -"
    colours: dict[str, str] = {}
    free = iter(c for c in PALETTE if c != _STRONG)
    for name in series:
        colours[name] = _STRONG if name == strong else next(free, PALETTE[len(colours) % len(PALETTE)])
    # The headline series last, so it is drawn over the others.
    order = sorted(series, key=lambda k: k == strong)
    slots: dict[str, tuple[float, float]] = {}
    lx, row = float(left), 0
    for name in series:
        w = 24 + 7 * min(len(legends[name]), 34)
        if lx + w > width - right and lx > left:
            lx, row = float(left), row + 1
        slots[name] = (lx, height - 12 + 16 * row)
        lx += w
    height += 16 * row
    for name in order:
        values = series[name]
        colour = colours[name]
        width_px = 3.5 if name == strong else 2
        segment: list[str] = []
        segments: list[list[str]] = []
        for i, val in enumerate(values):
            if val is None:
                if segment:
                    segments.append(segment)
                segment = []
                continue
            segment.append(f"{_fmt(x(i))},{_fmt(y(val))}")
            children.append(
                el(
                    "circle",
                    {"cx": _fmt(x(i)), "cy": _fmt(y(val)), "r": 4 if name == strong else 3, "fill": colour},
                    el(
                        "title",
                        None,
                        f"{name} @ {x_labels[i] if i < len(x_labels) else i}: " + fmt(val),
                    ),
                )
            )
        if segment:
            segments.append(segment)
        for seg in segments:
            if len(seg) > 1:
                children.append(
                    el(
                        "polyline",
                        {"points": " ".join(seg), "fill": "none", "stroke": colour, "stroke-width": width_px},
                    )
                )
        legend_x, legend_y = slots[name]
        children.append(
            el("rect", {"x": _fmt(legend_x), "y": legend_y - 8, "width": 10, "height": 10, "fill": colour})
        )
        children.append(
            el("text", {"x": _fmt(legend_x + 14), "y": legend_y + 1, "class": "lbl"}, legends[name])
        )
    return _svg(width, height, title, *children)


def _pct(v: float) -> str:
    return f"{v * 100:.0f}%"


def histogram(bins: Sequence[int], *, title: str, width: int = 260, height: int = 110) -> Markup:
    """Counts per score 0..10 (one bar per integer score)."""
    left, bottom, top = 6, 18, 14
    n = max(len(bins), 1)
    w = (width - 2 * left) / n
    peak = max([*bins, 1])
    plot_h = height - bottom - top
    children: list[Markup] = []
    for i, count in enumerate(bins):
        h = plot_h * count / peak
        bx = left + i * w
        children.append(
            el(
                "rect",
                {
                    "x": _fmt(bx + 1),
                    "y": _fmt(top + plot_h - h),
                    "width": _fmt(w - 2),
                    "height": _fmt(h),
                    "fill": PALETTE[0],
                },
                el("title", None, f"score {i}: {count}"),
            )
        )
        children.append(
            el(
                "text",
                {"x": _fmt(bx + w / 2), "y": height - 5, "text-anchor": "middle", "class": "tick"},
                str(i),
            )
        )
        if count:
            children.append(
                el(
                    "text",
                    {
                        "x": _fmt(bx + w / 2),
                        "y": _fmt(top + plot_h - h - 2),
                        "text-anchor": "middle",
                        "class": "tick",
                    },
                    str(count),
                )
            )
    return _svg(width, height, title, *children)
