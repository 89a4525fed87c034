"""Small SVG bar charts for BENCHMARKS.md: one per measure, with the goal or anchor drawn as a
line. Standard library only (make bench must not need matplotlib)."""
from __future__ import annotations

from html import escape
from pathlib import Path

WIDTH, BAR_H, GAP, LEFT, RIGHT, TOP = 640, 22, 8, 250, 70, 36


def bar_chart(path: Path, title: str, unit: str, bars: list[tuple[str, float]],
              goal: tuple[str, float] | None = None, log: bool = False) -> Path:
    """Horizontal bars (label, value); `goal` draws a dashed line at its value with its label.
    `log` uses a log10 axis (for anchors orders of magnitude away)."""
    import math

    values = [v for _, v in bars] + ([goal[1]] if goal else [])
    top = max(values) if values else 1.0
    top = top * 1.1 if top > 0 else 1.0
    plot_w = WIDTH - LEFT - RIGHT

    def x(v: float) -> float:
        if log:
            lo = math.log10(max(min(v for v in values if v > 0) / 2, 1e-6)) if any(v > 0 for v in values) else -1
            hi = math.log10(top)
            return LEFT + plot_w * (math.log10(max(v, 10 ** lo)) - lo) / (hi - lo or 1)
        return LEFT + plot_w * max(v, 0) / top

    height = TOP + len(bars) * (BAR_H + GAP) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i, (label, v) in enumerate(bars):
        y = TOP + i * (BAR_H + GAP)
        w = max(x(v) - LEFT, 1)
        out.append(f'<text x="{LEFT - 6}" y="{y + BAR_H * 0.7:.1f}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="#4878a8"/>')
        out.append(f'<text x="{LEFT + w + 4:.1f}" y="{y + BAR_H * 0.7:.1f}">{v:g} {escape(unit)}</text>')
    axis_y = TOP + len(bars) * (BAR_H + GAP)
    out.append(f'<line x1="{LEFT}" y1="{TOP - 4}" x2="{LEFT}" y2="{axis_y}" stroke="#333"/>')
    if goal:
        gx = x(goal[1])
        out.append(f'<line x1="{gx:.1f}" y1="{TOP - 4}" x2="{gx:.1f}" y2="{axis_y}" stroke="#c0392b" '
                   f'stroke-dasharray="5,3"/>')
        out.append(f'<text x="{gx:.1f}" y="{axis_y + 16}" fill="#c0392b" text-anchor="middle">'
                   f'{escape(goal[0])}</text>')
    if log:
        out.append(f'<text x="{WIDTH - 10}" y="{axis_y + 16}" text-anchor="end" fill="#666">log scale</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    return path
