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
    frame = _Frame(width, height, max(len(x_labels), 1), y_max)
    children = [*_axes(frame, x_labels, percent), *_marker_lines(frame, markers)]
    legends = {
        name: f"{name} {_value_text(last, percent)}" if (last := _last(values)) is not None else f"{name} -"
        for name, values in series.items()
    }
    colours = _colours(series, strong)
    slots, rows = _legend_slots(frame, legends)
    # The headline series last, so it is drawn over the others.
    for name in sorted(series, key=lambda k: k == strong):
        children += _series_marks(frame, name, series[name], colours[name], name == strong, x_labels, percent)
        legend_x, legend_y = slots[name]
        children.append(
            el(
                "rect",
                {"x": _fmt(legend_x), "y": legend_y - 8, "width": 10, "height": 10, "fill": colours[name]},
            )
        )
        children.append(
            el("text", {"x": _fmt(legend_x + 14), "y": legend_y + 1, "class": "lbl"}, legends[name])
        )
    # Legend entries flow into rows below the plot; the picture grows by a row when they overflow.
    return _svg(width, height + 16 * rows, title, *children)


@dataclass(frozen=True)
class _Frame:
    """Where a line chart's plot lies in its picture (margins in px), and how runs and values map into it."""

    width: int
    height: int
    n: int
    y_max: float
    left: int = 44
    right: int = 16
    top: int = 14
    bottom: int = 46

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom

    def x(self, i: int) -> float:
        return self.left + (self.plot_w * (i + 0.5) / self.n)

    def y(self, v: float) -> float:
        return self.top + self.plot_h * (1 - max(0.0, min(v, self.y_max)) / self.y_max)


def _value_text(v: float, percent: bool) -> str:
    return _pct(v) if percent else _num(v)


def _last(values: Sequence[float | None]) -> float | None:
    return next((v for v in reversed(values) if v is not None), None)


def _axes(f: _Frame, x_labels: Sequence[str], percent: bool) -> list[Markup]:
    """Five grid lines with their ticks, and one label per run below the plot."""
    out: list[Markup] = []
    for k in range(5):
        v = f.y_max * k / 4
        out.append(
            el(
                "line",
                {
                    "x1": f.left,
                    "x2": f.width - f.right,
                    "y1": _fmt(f.y(v)),
                    "y2": _fmt(f.y(v)),
                    "class": "grid",
                },
            )
        )
        tick = f"{v * 100:.0f}%" if percent else _num(v)
        out.append(
            el("text", {"x": f.left - 4, "y": _fmt(f.y(v) + 4), "text-anchor": "end", "class": "tick"}, tick)
        )
    for i, lab in enumerate(x_labels):
        out.append(
            el(
                "text",
                {"x": _fmt(f.x(i)), "y": f.height - f.bottom + 14, "text-anchor": "middle", "class": "tick"},
                lab,
            )
        )
    return out


def _marker_lines(f: _Frame, markers: Sequence[Marker]) -> list[Markup]:
    """A dashed line before each marked run, with its text as a tooltip and a shortened label."""
    out: list[Markup] = []
    for mi, m in enumerate(markers):
        mx = f.x(m.index) - f.plot_w / f.n / 2
        out.append(
            el(
                "line",
                {"x1": _fmt(mx), "x2": _fmt(mx), "y1": f.top, "y2": f.top + f.plot_h, "class": "marker"},
                el("title", None, m.text),
            )
        )
        label = m.text if len(m.text) <= 60 else m.text[:59] + "\u2026"
        # Stagger the labels of neighbouring markers so they do not print over each other.
        ty = f.top + 10 + 11 * (mi % 3)
        out.append(el("text", {"x": _fmt(mx + 3), "y": ty, "class": "marker-text"}, "\u25b2 " + label))
    return out


def _colours(series: Mapping[str, object], strong: str | None) -> dict[str, str]:
    """The headline series dark; the others take the palette in order (never the headline's colour)."""
    colours: dict[str, str] = {}
    free = iter(c for c in PALETTE if c != _STRONG)
    for name in series:
        colours[name] = _STRONG if name == strong else next(free, PALETTE[len(colours) % len(PALETTE)])
    return colours


def _legend_slots(f: _Frame, legends: Mapping[str, str]) -> tuple[dict[str, tuple[float, float]], int]:
    """Where each legend entry goes, flowing into rows below the plot, and how many extra rows it took."""
    slots: dict[str, tuple[float, float]] = {}
    lx, row = float(f.left), 0
    for name, text in legends.items():
        w = 24 + 7 * min(len(text), 34)
        if lx + w > f.width - f.right and lx > f.left:
            lx, row = float(f.left), row + 1
        slots[name] = (lx, f.height - 12 + 16 * row)
        lx += w
    return slots, row


def _series_marks(
    f: _Frame,
    name: str,
    values: Sequence[float | None],
    colour: str,
    strong: bool,
    x_labels: Sequence[str],
    percent: bool,
) -> list[Markup]:
    """One series: a dot per value with a tooltip, and a line through each run of values without a gap."""
    out: list[Markup] = []
    segment: list[str] = []
    segments: list[list[str]] = []
    for i, val in enumerate(values):
        if val is None:
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{_fmt(f.x(i))},{_fmt(f.y(val))}")
        run = x_labels[i] if i < len(x_labels) else i
        out.append(
            el(
                "circle",
                {"cx": _fmt(f.x(i)), "cy": _fmt(f.y(val)), "r": 4 if strong else 3, "fill": colour},
                el("title", None, f"{name} @ {run}: " + _value_text(val, percent)),
            )
        )
    if segment:
        segments.append(segment)
    width_px = 3.5 if strong else 2
    for seg in segments:
        if len(seg) > 1:
            out.append(
                el(
                    "polyline",
                    {"points": " ".join(seg), "fill": "none", "stroke": colour, "stroke-width": width_px},
                )
            )
    return out


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
