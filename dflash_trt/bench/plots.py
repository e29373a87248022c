"""PNG plots of a bench report: acceptance rate per draft position, and the τ histogram (one series per dataset).

Uses matplotlib's object API with the Agg canvas directly (no pyplot): no global backend switch, no display needed,
safe in threads and in processes that use matplotlib for something else.
"""

from __future__ import annotations

import os
from pathlib import Path

ACCEPTANCE_PNG = "acceptance_per_position.png"
TAU_HISTOGRAM_PNG = "tau_histogram.png"


def _figure(width: float = 8.0, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _subtitle(report: dict) -> str:
    s = report.get("settings", {})
    k = s.get("verify_len", s.get("block_size"))  # reports before version 2 called K block_size
    return (f"K={k}  T={s.get('temperature')}  batch={s.get('batch_size')}  "
            f"max_new_tokens={s.get('max_new_tokens')}  {report.get('device', {}).get('name', '')}")


def _save(fig, path: Path) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(str(tmp), format="png")
    os.replace(tmp, path)
    return path


def plot_acceptance(report: dict, path: str | os.PathLike) -> Path:
    """Share of steps whose k-th draft was accepted, k = 1..K-1: one line per dataset, overall dashed."""
    fig, ax = _figure()
    series = [(name, d["per_position_acceptance"], "-") for name, d in report["datasets"].items()]
    if len(series) > 1:
        series.append(("overall", report["overall"]["per_position_acceptance"], "--"))
    for name, acc, style in series:
        xs = list(range(1, len(acc) + 1))
        kw = {"color": "black"} if name == "overall" else {}
        ax.plot(xs, acc, style, marker="o", markersize=3, label=name, **kw)
    k_minus_1 = max((len(a) for _, a, _ in series), default=1)
    ax.set_xlim(0.5, max(k_minus_1, 1) + 0.5)
    ax.set_xticks(list(range(1, k_minus_1 + 1)))
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("draft position k (1 = first drafted token)")
    ax.set_ylabel("acceptance rate  P(τ > k)")
    ax.set_title(f"DFlash acceptance per draft position\n{_subtitle(report)}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_tau_histogram(report: dict, path: str | os.PathLike) -> Path:
    """Fraction of spec steps with τ = t, t = 1..K: grouped bars, one colour per dataset (mean τ in the legend)."""
    fig, ax = _figure()
    items = list(report["datasets"].items())
    k = max((len(d["histogram"]) for _, d in items), default=1)
    width = 0.8 / max(len(items), 1)
    for j, (name, d) in enumerate(items):
        frac = d["histogram_fraction"]
        xs = [t + 1 - 0.4 + width * (j + 0.5) for t in range(len(frac))]
        tau = d.get("mean_tau")
        label = f"{name} (mean τ {tau:.2f})" if tau is not None else f"{name} (no spec steps)"
        ax.bar(xs, frac, width=width, label=label)
    ax.set_xlim(0.5, k + 0.5)
    ax.set_xticks(list(range(1, k + 1)))
    ax.set_xlabel("τ (tokens per step, incl. bonus)")
    ax.set_ylabel("fraction of steps")
    ax.set_title(f"DFlash acceptance length histogram\n{_subtitle(report)}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))


def write_plots(report: dict, output_dir: str | os.PathLike) -> dict[str, Path]:
    out = Path(output_dir)
    return {"acceptance_plot": plot_acceptance(report, out / ACCEPTANCE_PNG),
            "tau_histogram_plot": plot_tau_histogram(report, out / TAU_HISTOGRAM_PNG)}
