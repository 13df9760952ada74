"""The operations overview's chart, drawn on the server."""

from datetime import datetime

from django.utils.translation import ngettext


def hourly_chart_svg(hourly: list[tuple[datetime, int, int]], *, width: int = 720, height: int = 160) -> str:
    """The last 24 h as an inline SVG bar chart (pay-ins and payouts per hour), drawn on the server: no script,
    nothing loaded from anywhere. Returns markup built from numbers only."""
    pad_left, pad_bottom, pad_top = 36, 18, 8
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - pad_top
    peak = max([max(i, o) for _, i, o in hourly] + [1])
    slot = plot_w / max(len(hourly), 1)
    bar = max(slot / 2 - 1, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
             f'{height}" role="img" aria-label="Orders per hour, last 24 hours" class="ops-chart">',
             f'<line x1="{pad_left}" y1="{pad_top + plot_h}" x2="{width - 4}" y2="{pad_top + plot_h}" '
             f'stroke="#999" stroke-width="1"/>',
             f'<text x="{pad_left - 4}" y="{pad_top + 8}" text-anchor="end" font-size="10" fill="#666">{peak}</text>',
             f'<text x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end" font-size="10" fill="#666">0</text>']
    for index, (hour, payins, payouts) in enumerate(hourly):
        x = pad_left + index * slot
        for offset, value, colour, label in ((0, payins, "#417690", ngettext("pay-in", "pay-ins", payins)),
                                             (bar + 1, payouts, "#c0823a", ngettext("payout", "payouts", payouts))):
            h = round(plot_h * value / peak, 1)
            parts.append(f'<rect x="{x + offset:.1f}" y="{pad_top + plot_h - h:.1f}" width="{bar:.1f}" '
                         f'height="{h}" fill="{colour}"><title>{hour:%H}:00 UTC: {value} {label}</title></rect>')
        if index % 3 == 0:
            parts.append(f'<text x="{x + bar:.1f}" y="{height - 4}" text-anchor="middle" font-size="10" '
                         f'fill="#666">{hour:%H}h</text>')
    parts.append("</svg>")
    return "".join(parts)
