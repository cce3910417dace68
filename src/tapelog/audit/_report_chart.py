"""The report's chart: one stacked bar per loop request, drawn as inline SVG.

Drawn in Python rather than by script so the page shows the chart even with
JavaScript off, and so a test can count the bars in the markup. Each bar is a
``<g class="bar" data-index="N">`` (N is the request's 1-based index) holding
the cached part (bottom), the uncached part (top), an optional tick at the
cache the log says was possible, a native tooltip, and, when the cache broke,
a marker above the bar labelled with the cause. The bar (its column) is a link
to its request's section (``ReportLinks.request``), so it leads there without
script.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from tapelog.audit._report_links import ReportLinks

__all__ = ["Bar", "chart_svg", "legend_html"]

_PLOT_WIDTH = 1000  # px available for bars before the chart starts to scroll
_MIN_SLOT = 6
_TOP = 28  # above the plot; grows to fit the rotated cause labels
_HEIGHT = 300  # plot height
_LEFT = 72
_RIGHT = 24
_BOTTOM = 70
_LABEL_CHARS = 26
_CHAR_W = 6.2  # px per label character at 11px
_SIN, _COS = math.sin(math.radians(40)), math.cos(math.radians(40))


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """What the chart needs to know about one request."""

    index: int
    turn: int | None
    step: int | None
    prompt: int
    cached: int
    expected: int | None
    breaks: tuple[tuple[str, str], ...]
    """(cause kind, short label) for each cause of a cache break; empty: none."""


def _nice_step(top: int) -> int:
    """A 1/2/5 x 10^k tick step giving at most six ticks up to ``top``."""
    raw = max(top, 1) / 6
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return int(factor * power)
    return int(10 * power)  # pragma: no cover - the loop always returns


def _fmt(n: int) -> str:
    return f"{n:,}"


def _tooltip(bar: Bar) -> str:
    lines = [f"Request #{bar.index} · turn {bar.turn}, step {bar.step}"]
    ratio = f" ({100 * bar.cached / bar.prompt:.0f}%)" if bar.prompt else ""
    lines.append(f"prompt {_fmt(bar.prompt)} tok · cached {_fmt(bar.cached)}{ratio}")
    if bar.expected is not None:
        lines.append(f"expected cached: {_fmt(bar.expected)} tok")
    lines.extend(f"cache break: {label}" for _, label in bar.breaks)
    return "\n".join(lines)


def _label(bar: Bar) -> str:
    label = " · ".join(label for _, label in bar.breaks)
    return label if len(label) <= _LABEL_CHARS else label[: _LABEL_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where the plot sits: its top edge, the px per token and the px per bar."""

    top: float
    scale: float
    slot: float

    @property
    def base(self) -> float:
        return self.top + _HEIGHT


def _turn_bands(bars: Sequence[Bar], frame: _Frame) -> list[str]:
    """Alternating background bands, and a label under each turn that has room for one."""
    out: list[str] = []
    start, shade, free_x = 0, 0, 0.0
    for i in range(1, len(bars) + 1):
        if i < len(bars) and bars[i].turn == bars[start].turn:
            continue
        x0, x1 = _LEFT + start * frame.slot, _LEFT + i * frame.slot
        out.append(
            f'<rect class="band{" band-odd" if shade else ""}" x="{x0:.1f}" y="{frame.top:.1f}" '
            f'width="{x1 - x0:.1f}" height="{_HEIGHT}"/>'
        )
        label = f"turn {bars[start].turn}"
        half = len(label) * _CHAR_W / 2
        end = _LEFT + len(bars) * frame.slot
        if free_x <= (x0 + x1) / 2 - half and (x0 + x1) / 2 + half <= end:  # no overlaps
            free_x = (x0 + x1) / 2 + half + 8
            out.append(
                f'<text class="turn-label" x="{(x0 + x1) / 2:.1f}" y="{frame.base + 36:.1f}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
        start, shade = i, 1 - shade
    return out


def _tick_every(slot: float) -> int:
    """Label every k-th request (k = 1, 2, 5, 10, 20, …) so numbers keep ~30 px apart."""
    k = 1
    while k * slot < 30:
        k = k * 5 // 2 if str(k)[0] == "2" else k * 2
    return k


def _bar(bar: Bar, x: float, width: float, frame: _Frame, show_index: bool, href: str) -> str:
    base = frame.base
    cached_h = bar.cached * frame.scale
    uncached_h = max(bar.prompt - bar.cached, 0) * frame.scale
    parts = [
        f'<g class="bar{" break" if bar.breaks else ""}" data-index="{bar.index}" '
        f'data-turn="{bar.turn}" data-step="{bar.step}">',
        f"<title>{escape(_tooltip(bar))}</title>",
        f'<a href="{href}">',
        # An invisible full-height target keeps short bars easy to hover and click.
        f'<rect class="hit" x="{x:.1f}" y="{frame.top:.1f}" width="{width:.1f}" '
        f'height="{_HEIGHT}"/>',
        f'<rect class="uncached" x="{x:.1f}" y="{base - cached_h - uncached_h:.1f}" '
        f'width="{width:.1f}" height="{uncached_h:.1f}"/>',
        f'<rect class="cached" x="{x:.1f}" y="{base - cached_h:.1f}" '
        f'width="{width:.1f}" height="{cached_h:.1f}"/></a>',
    ]
    if bar.expected is not None and bar.expected != bar.cached:
        y = base - bar.expected * frame.scale
        parts.append(
            f'<line class="expected" x1="{x - 2:.1f}" x2="{x + width + 2:.1f}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
        )
    if show_index:
        parts.append(
            f'<text class="tick-label" x="{x + width / 2:.1f}" y="{base + 16:.1f}" '
            f'text-anchor="middle">{bar.index}</text>'
        )
    if bar.breaks:
        cx, tip = x + width / 2, base - cached_h - uncached_h - 6
        parts.append(
            f'<path class="marker cause-{escape(bar.breaks[0][0])}" '
            f'd="M{cx - 5:.1f},{tip - 9:.1f} L{cx + 5:.1f},{tip - 9:.1f} L{cx:.1f},{tip:.1f} Z"/>'
            f'<text class="cause-label" transform="translate({cx + 3:.1f},{tip - 13:.1f}) '
            f'rotate(-40)">{escape(_label(bar))}</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def chart_svg(bars: Sequence[Bar], links: ReportLinks | None = None) -> str:
    """The whole chart: axes, gridlines, turn bands and the bars (each a link)."""
    links = links or ReportLinks()
    if not bars:
        return '<p class="empty">This session has no loop requests yet: nothing to chart.</p>'
    slot = max(_PLOT_WIDTH / len(bars), _MIN_SLOT)
    plot_w = slot * len(bars)
    top_value = max(max(b.prompt for b in bars), max(b.expected or 0 for b in bars), 1)
    step = _nice_step(top_value)
    ceiling = step * math.ceil(top_value / step)
    scale = _HEIGHT / ceiling
    # Grow the margins above and right of the plot to fit the rotated cause labels.
    top, width = float(_TOP), _LEFT + plot_w + _RIGHT
    for i, bar in enumerate(bars):
        if bar.breaks:
            reach = len(_label(bar)) * _CHAR_W
            top = max(top, 36 + reach * _SIN - (ceiling - bar.prompt) * scale)
            width = max(width, _LEFT + (i + 0.5) * slot + 8 + reach * _COS)
    frame = _Frame(top=top, scale=scale, slot=slot)
    height = frame.base + _BOTTOM
    bar_w = max(min(slot * 0.68, 56), 4)
    every = _tick_every(slot)
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="Prompt tokens per loop request, cached and uncached">',
        *_turn_bands(bars, frame),
    ]
    for value in range(0, ceiling + 1, step):
        y = frame.base - value * scale
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_w:.1f}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick-label" x="{_LEFT - 8}" y="{y + 4:.1f}" '
            f'text-anchor="end">{_fmt(value)}</text>'
        )
    for i, bar in enumerate(bars):
        x = _LEFT + i * slot + (slot - bar_w) / 2
        shown = every == 1 or bar.index % every == 0 or i == 0
        out.append(_bar(bar, x, bar_w, frame, shown, links.request(bar.index)))
    base = frame.base
    out += [
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT + plot_w:.1f}" y1="{base:.1f}" '
        f'y2="{base:.1f}"/>',
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT}" y1="{top:.1f}" y2="{base:.1f}"/>',
        f'<text class="axis-title" transform="translate(18,{top + _HEIGHT / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">prompt tokens</text>',
        f'<text class="axis-title" x="{_LEFT + plot_w / 2:.1f}" y="{height - 8:.1f}" '
        f'text-anchor="middle">loop request # (grouped by turn)</text>',
        "</svg>",
    ]
    return "".join(out)


def legend_html(kinds: Mapping[str, str], has_expected: bool) -> str:
    """The chart legend as HTML (wraps on narrow screens, unlike SVG text)."""
    items: list[Any] = [
        '<span class="key"><i class="swatch cached"></i>cached (reported by the provider)</span>',
        '<span class="key"><i class="swatch uncached"></i>not cached</span>',
    ]
    if has_expected:
        items.append(
            '<span class="key"><i class="swatch expected"></i>'
            "expected cache (the provider's rule applied to the log)</span>"
        )
    for kind, text in kinds.items():
        items.append(
            f'<span class="key"><i class="swatch marker cause-{escape(kind)}"></i>'
            f"{escape(text)}</span>"
        )
    return f'<div class="legend">{"".join(items)}</div>'
