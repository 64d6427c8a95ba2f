"""One-call quality report: :func:`report` -> :class:`QualityReport` (table, plots, exports)."""

from __future__ import annotations

import base64
import html
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from forestgen.metrics._prep import (
    category_strings,
    infer_schema,
    numeric_values,
    prepare,
    subsample,
)
from forestgen.metrics.coverage import (
    AlphaPrecisionResult,
    alpha_precision_beta_recall,
    nn_precision_recall,
)
from forestgen.metrics.fidelity import (
    AssociationGap,
    C2STResult,
    association_gap,
    c2st,
    energy_distance,
    marginal_distances,
    mmd,
    sliced_wasserstein,
)
from forestgen.metrics.privacy import DCRResult, dcr
from forestgen.metrics.rules import rule_violations
from forestgen.metrics.sdmetrics_scores import sdmetrics_quality
from forestgen.metrics.utility import TSTRResult, tstr

__all__ = ["ALL_METRICS", "QualityReport", "report"]

ALL_METRICS = ("marginals", "association", "sdmetrics", "c2st", "mmd", "energy",
               "sliced_wasserstein", "alpha_precision", "nn_precision_recall", "tstr", "dcr",
               "rules")

_IDEAL = {
    "ks": 0.0, "tv": 0.0, "ks_mean": 0.0, "tv_mean": 0.0, "association_gap_mean": 0.0,
    "association_gap_max": 0.0, "c2st_auc": 0.5, "c2st_auc_ci_low": 0.5,
    "c2st_auc_ci_high": 0.5, "c2st_accuracy": 0.5, "mmd2": 0.0, "energy_distance": 0.0,
    "sliced_wasserstein": 0.0, "alpha_precision_delta": 1.0, "beta_recall_delta": 1.0,
    "authenticity": np.nan, "nn_precision": np.nan, "nn_recall": np.nan,
    "sdmetrics_column_shapes": 1.0, "sdmetrics_column_pair_trends": 1.0,
    "sdmetrics_overall": 1.0, "dcr_share_closer_to_train": 0.5,
    "dcr_share_below_holdout_p5": 0.05, "copying_flag": 0.0, "rule_violation_rate": 0.0,
}


@dataclass
class QualityReport:
    """Synthetic-data quality report.

    ``table``: tidy DataFrame (``group, metric, column, value, ideal``); ``columns``: per-column
    marginal distances; ``association``: :class:`AssociationGap` (``.matrix`` is the gap matrix);
    the remaining attributes hold the individual metric results (``None`` when skipped).
    """

    table: pd.DataFrame
    columns: pd.DataFrame | None
    association: AssociationGap | None
    c2st: C2STResult | None = None
    alpha_precision: AlphaPrecisionResult | None = None
    utility: TSTRResult | None = None
    privacy: DCRResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)
    _real_sample: pd.DataFrame | None = field(default=None, repr=False)
    _synthetic_sample: pd.DataFrame | None = field(default=None, repr=False)
    _png_cache: dict[str, bytes] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ access
    def value(self, metric: str, column: str | None = None) -> float:
        """Value of one metric (optionally for one column) from :attr:`table`."""
        t = self.table[self.table["metric"] == metric]
        t = t[t["column"] == column] if column is not None else t[t["column"].isna()]
        if t.empty:
            raise KeyError(f"no metric {metric!r}" + (f" for column {column!r}" if column else ""))
        return float(t["value"].iloc[0])

    def _get(self, metric: str) -> float:
        try:
            return self.value(metric)
        except KeyError:
            return float("nan")

    def summary(self) -> str:
        """A few lines for the terminal."""
        i = self.info
        g = self._get
        lines = [f"forestgen quality report: {i.get('n_real')} real vs {i.get('n_synthetic')} "
                 f"synthetic rows, {i.get('n_columns')} columns ({i.get('n_numeric')} numeric, "
                 f"{i.get('n_categorical')} categorical)"]
        fid = [f"mean KS {g('ks_mean'):.3f}", f"mean TV {g('tv_mean'):.3f}",
               f"assoc gap {g('association_gap_mean'):.3f}"]
        if self.c2st is not None:
            lo, hi = self.c2st.auc_ci
            fid.append(f"C2ST AUC {self.c2st.auc:.3f} [{lo:.3f}, {hi:.3f}] vs "
                       f"{i.get('c2st_reference', 'training')} rows")
        fid += [f"MMD^2 {g('mmd2'):.4f}", f"energy {g('energy_distance'):.4f}",
                f"SW {g('sliced_wasserstein'):.4f}"]
        n_rules = int((self.table["metric"] == "rule_violation_share").sum())
        if n_rules:
            fid.append(f"rules broken by {g('rule_violation_rate'):.1%} of rows ({n_rules} "
                       f"rule{'s' if n_rules > 1 else ''})")
        lines.append("  fidelity : " + " | ".join(s for s in fid if "nan" not in s))
        sdm = [f"overall {g('sdmetrics_overall'):.3f}",
               f"Column Shapes {g('sdmetrics_column_shapes'):.3f}",
               f"Column Pair Trends {g('sdmetrics_column_pair_trends'):.3f}"]
        if any("nan" not in s for s in sdm):
            lines.append("  SDMetrics: " + " | ".join(s for s in sdm if "nan" not in s))
        cov = [f"alpha-precision {g('alpha_precision_delta'):.3f}",
               f"beta-recall {g('beta_recall_delta'):.3f}",
               f"authenticity {g('authenticity'):.3f}",
               f"NN precision {g('nn_precision'):.3f}", f"NN recall {g('nn_recall'):.3f}"]
        if any("nan" not in s for s in cov):  # (not computed: no line)
            lines.append("  coverage : " + " | ".join(s for s in cov if "nan" not in s))
        if self.utility is not None:
            u = self.utility
            parts = [f"{k} TSTR {u.tstr[k]:.3f} / TRTR {u.trtr[k]:.3f}" for k in u.trtr]
            lines.append(f"  utility  : ({u.task}, target {u.target!r}) " + " | ".join(parts))
        if self.privacy is not None:
            p = self.privacy
            dcr = f"DCR p5 synthetic {p.dcr_synthetic_p5:.3f}"
            if np.isfinite(p.dcr_holdout_p5):
                dcr += (f" vs holdout {p.dcr_holdout_p5:.3f} | closer-to-train share "
                        f"{p.share_closer_to_train:.3f}")
            else:
                dcr += " (no holdout rows to compare)"
            lines.append(f"  privacy  : {dcr} | exact matches {p.exact_match_synthetic:.3%}"
                         + (" | COPYING SUSPECTED" if p.copying else ""))
        if self.timings:
            lines.append(f"  time     : {sum(self.timings.values()):.1f} s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    # ------------------------------------------------------------------ plots
    def figures(self) -> dict[str, object]:
        """matplotlib Figures (no pyplot/global backend): marginals, association gap, curves."""
        figs: dict[str, object] = {}
        if self._real_sample is not None and self._synthetic_sample is not None:
            figs["marginals"] = _plot_marginals(self._real_sample, self._synthetic_sample,
                                                self.info.get("kinds"))
        if self.association is not None and len(self.association.matrix) > 1:
            figs["association_gap"] = _plot_heatmap(self.association.matrix)
        if self.alpha_precision is not None:
            figs["alpha_precision"] = _plot_curves(self.alpha_precision)
        return figs

    def _pngs(self) -> dict[str, bytes]:
        """Rendered figures; empty when matplotlib is not installed (the report says so)."""
        if self._png_cache is None:
            self._png_cache = ({k: _png(f) for k, f in self.figures().items()}
                               if _have_matplotlib() else {})
        return self._png_cache

    # ------------------------------------------------------------------ exports
    def _sections(self) -> list[tuple[str, str | None, pd.DataFrame | None, str | None]]:
        """(title, text, table, figure-name) in display order."""
        overall = self.table[self.table["column"].isna()].drop(columns="column")
        overall = overall.reset_index(drop=True)
        secs: list[tuple[str, str | None, pd.DataFrame | None, str | None]] = [
            ("Summary", self.summary(), None, None),
            ("Metrics", None, overall, None),
        ]
        if self.columns is not None:
            secs.append(("Per-column marginals", "KS for numeric, total variation for "
                         "categorical columns (0 = identical).", self.columns,
                         "marginals"))
        if self.association is not None:
            secs.append(("Pairwise associations", f"Mean |gap| {self.association.gap:.4f}, "
                         f"max {self.association.max_gap:.4f} (Pearson / Cramér's V / "
                         "correlation ratio).", self.association.matrix.round(3),
                         "association_gap"))
        if self.alpha_precision is not None:
            a = self.alpha_precision
            curve = pd.DataFrame({"alpha": a.alphas, "alpha_precision": a.alpha_precision,
                                  "beta_recall": a.beta_recall})
            secs.append(("Coverage", "alpha-precision / beta-recall (Alaa et al., 2022); "
                         "ideal curves are the diagonal.", curve, "alpha_precision"))
        if self.utility is not None:
            secs.append(("Utility", f"TSTR vs TRTR, {self.utility.task} of "
                         f"{self.utility.target!r} on {self.utility.n_test} real test rows.",
                         self.utility.table, None))
        if self.privacy is not None:
            p = pd.DataFrame([{"metric": k, "value": v}
                              for k, v in vars(self.privacy).items()])
            secs.append(("Privacy", "Distance to closest record vs a real holdout baseline.",
                         p, None))
        if self.timings:
            t = pd.DataFrame({"metric": list(self.timings), "seconds": list(self.timings.values())})
            secs.append(("Timings", None, t, None))
        return secs

    def to_markdown(self, path: str | Path) -> Path:
        """Write a Markdown report; figures go to ``<stem>_figures/`` next to it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig_dir = path.parent / f"{path.stem}_figures"
        figs = self._pngs()
        names: dict[str, str] = {}
        if figs:
            fig_dir.mkdir(exist_ok=True)
            for name, png in figs.items():
                (fig_dir / f"{name}.png").write_bytes(png)
                names[name] = f"{fig_dir.name}/{name}.png"
        out = ["# Synthetic data quality report", ""]
        if not _have_matplotlib():
            out += [_NO_PLOTS, ""]
        for title, text, table, fig in self._sections():
            out += [f"## {title}", ""]
            if title == "Summary" and text:
                out += ["```", text, "```", ""]
            elif text:
                out += [text, ""]
            if table is not None:
                out += [_md_table(table), ""]
            if fig in names:
                out += [f"![{fig}]({names[fig]})", ""]
        path.write_text("\n".join(out), encoding="utf-8")
        return path

    def to_html(self, path: str | Path) -> Path:
        """Write a self-contained HTML report (figures embedded as base64 PNG)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        figs = {k: base64.b64encode(v).decode("ascii") for k, v in self._pngs().items()}
        body = ["<h1>Synthetic data quality report</h1>"]
        if not _have_matplotlib():
            body.append(f"<p>{html.escape(_NO_PLOTS)}</p>")
        for title, text, table, fig in self._sections():
            body.append(f"<h2>{html.escape(title)}</h2>")
            if title == "Summary" and text:
                body.append(f"<pre>{html.escape(text)}</pre>")
            elif text:
                body.append(f"<p>{html.escape(text)}</p>")
            if table is not None:
                body.append(table.to_html(index=title == "Pairwise associations",
                                          float_format=lambda v: f"{v:.4g}", na_rep="",
                                          border=0, classes="tbl"))
            if fig in figs:
                body.append(f'<img alt="{fig}" src="data:image/png;base64,{figs[fig]}">')
        style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
                 ".tbl{border-collapse:collapse}.tbl td,.tbl th{padding:2px 8px;"
                 "border-bottom:1px solid #ddd;text-align:right}img{max-width:100%}")
        doc = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
               f"<title>forestgen quality report</title><style>{style}</style></head><body>"
               + "\n".join(body) + "</body></html>")
        path.write_text(doc, encoding="utf-8")
        return path


# ---------------------------------------------------------------------- helpers
_NO_PLOTS = "(figures omitted: matplotlib is not installed; `pip install matplotlib` adds them)"


def _have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _md_table(df: pd.DataFrame) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.4g}"
        return str(v).replace("|", "\\|")

    index = df.index.name is not None or not isinstance(df.index, pd.RangeIndex)
    cols = ([""] if index else []) + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in zip(df.index, df.itertuples(index=False)):
        cells = ([str(idx)] if index else []) + [fmt(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _png(fig: object) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # attaches an Agg canvas, independent of the pyplot backend
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return buf.getvalue()


#: levels drawn per categorical column (the rest are pooled into one "other" bar)
MAX_LEVELS = 15
#: a value holding at least this share of a numeric column's real rows is drawn as a point mass
#: (the share at which the encoder keeps a point mass, POINT_MASS_SHARE)
ATOM_SHARE = 0.1
#: a numeric column with at most this many distinct values is drawn as bars of its values
MAX_DISCRETE_VALUES = 20


def _plot_marginals(real: pd.DataFrame, syn: pd.DataFrame, kinds: object) -> object:
    """Real against synthetic marginals, one panel per column: categorical levels as
    horizontal bars with their full labels (wrapped); numeric columns as histograms, with point
    masses (values holding >= ``ATOM_SHARE`` of the real rows, e.g. zero inflation) drawn apart
    as bars of their shares and the rest as a histogram of its own (log-spaced when it spans
    decades); columns with few values as bars of their values; dates on a time axis."""
    from matplotlib.figure import Figure

    schema = infer_schema(real, kinds)
    cols = list(schema.columns)
    ncol = min(3, max(1, len(cols)))
    nrow = int(np.ceil(len(cols) / ncol))
    heights = []
    for r in range(nrow):
        row = cols[r * ncol:(r + 1) * ncol]
        n_bars = [min(real[c].nunique(dropna=False), MAX_LEVELS + 1)
                  for c in row if c not in schema.numeric]
        heights.append(max([2.8] + [0.8 + 0.22 * k for k in n_bars]))
    fig = Figure(figsize=(5.2 * ncol, sum(heights)))
    grid = fig.add_gridspec(nrow, ncol, height_ratios=heights)
    for i, col in enumerate(cols):
        cell = grid[i // ncol, i % ncol]
        if col in schema.numeric:
            axes = _numeric_panel(fig, cell, real[col], syn[col])
        else:
            axes = [fig.add_subplot(cell)]
            _bars(axes[0], category_strings(real[col]), category_strings(syn[col]))
        axes[0].set_title(str(col), fontsize=9, loc="left")
        for ax in axes:
            ax.tick_params(labelsize=7)
        if i == 0:
            axes[-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _bars(ax, a: np.ndarray, b: np.ndarray, order: list | None = None) -> None:
    """Horizontal bars of the shares of each label in ``a`` (real) and ``b`` (synthetic): the
    ``MAX_LEVELS`` most frequent real labels (or ``order``), the rest pooled, full labels."""
    import textwrap

    pa = pd.Series(a).value_counts(normalize=True)
    pb = pd.Series(b).value_counts(normalize=True)
    levels = list(pa.index) if order is None else order
    shown = levels[:MAX_LEVELS]
    va = pa.reindex(shown, fill_value=0).to_numpy()
    vb = pb.reindex(shown, fill_value=0).to_numpy()
    labels = [textwrap.fill(str(v), 22) for v in shown]
    rest = len(set(pa.index) | set(pb.index)) - len(shown)
    if rest > 0:
        va = np.append(va, 1.0 - va.sum())
        vb = np.append(vb, 1.0 - vb.sum())
        labels.append(f"other ({rest} levels)")
    y = np.arange(len(labels))
    ax.barh(y - 0.2, va, 0.4, label="real")
    ax.barh(y + 0.2, vb, 0.4, label="synthetic")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("share of rows", fontsize=7)


def _numeric_panel(fig, cell, real: pd.Series, syn: pd.Series) -> list:
    """One numeric column's panel (see :func:`_plot_marginals`); returns its axes."""
    time_kind = ("date" if ptypes.is_datetime64_any_dtype(real.dtype)
                 else "time" if ptypes.is_timedelta64_dtype(real.dtype) else None)
    a, b = numeric_values(real), numeric_values(syn)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    uniq, counts = np.unique(a, return_counts=True)
    if time_kind is None and 0 < uniq.size <= MAX_DISCRETE_VALUES:
        ax = fig.add_subplot(cell)
        _bars(ax, np.array([_fmt_value(v) for v in a]), np.array([_fmt_value(v) for v in b]),
              order=[_fmt_value(v) for v in uniq])
        return [ax]
    atoms = [] if time_kind else list(uniq[counts >= ATOM_SHARE * max(a.size, 1)])
    if atoms:
        sub = cell.subgridspec(1, 2, width_ratios=[1, 3], wspace=0.35)
        ax_atoms, ax = fig.add_subplot(sub[0]), fig.add_subplot(sub[1])
        names = [_fmt_value(v) for v in atoms]
        sa = [float(np.mean(a == v)) if a.size else 0.0 for v in atoms]
        sb = [float(np.mean(b == v)) if b.size else 0.0 for v in atoms]
        x = np.arange(len(atoms))
        ax_atoms.bar(x - 0.2, sa, 0.4)
        ax_atoms.bar(x + 0.2, sb, 0.4)
        ax_atoms.set_xticks(x)
        ax_atoms.set_xticklabels(names, fontsize=7)
        ax_atoms.set_ylabel("point mass share", fontsize=7)
        n_real = a.size
        a, b = a[~np.isin(a, atoms)], b[~np.isin(b, atoms)]
        axes = [ax_atoms, ax]
        ax.set_title(f"other values ({a.size / max(n_real, 1):.0%} of real rows)", fontsize=7)
    else:
        ax = fig.add_subplot(cell)
        axes = [ax]
    both = np.concatenate([a, b])
    if both.size:
        lo, hi = np.quantile(both, [0.005, 0.995])
        hi = hi if hi > lo else lo + 1.0
        log = time_kind is None and lo > 0 and hi / lo > 100
        bins = np.geomspace(lo, hi, 31) if log else np.linspace(lo, hi, 31)
        if time_kind == "date":
            import matplotlib.dates as mdates

            to = mdates.date2num
            conv = lambda v: to(pd.to_datetime(v, unit="s").to_numpy())  # noqa: E731
            ax.hist(conv(a), bins=conv(bins), density=True, alpha=0.5, label="real")
            ax.hist(conv(b), bins=conv(bins), density=True, alpha=0.5, label="synthetic")
            locator = mdates.AutoDateLocator()
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        else:
            scale = 3600.0 if time_kind == "time" else 1.0
            ax.hist(a / scale, bins=bins / scale, density=True, alpha=0.5, label="real")
            ax.hist(b / scale, bins=bins / scale, density=True, alpha=0.5, label="synthetic")
            if time_kind == "time":
                ax.set_xlabel("hours", fontsize=7)
            if log:
                ax.set_xscale("log")
                ax.set_xlabel("log scale", fontsize=7)
    return axes


def _fmt_value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _plot_heatmap(matrix: pd.DataFrame) -> object:
    from matplotlib.figure import Figure

    n = len(matrix)
    fig = Figure(figsize=(1.0 + 0.45 * n, 0.6 + 0.45 * n))
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(matrix.to_numpy(), cmap="Reds", vmin=0.0,
                   vmax=max(0.1, float(np.nanmax(matrix.to_numpy()))))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels([str(c) for c in matrix.columns], rotation=60, ha="right", fontsize=8)
    ax.set_yticklabels([str(c) for c in matrix.index], fontsize=8)
    ax.set_title("|association(real) - association(synthetic)|", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def _plot_curves(res: AlphaPrecisionResult) -> object:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.5, 4))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    ax.plot(res.alphas, res.alpha_precision, "o-", ms=3,
            label=f"alpha-precision ({res.delta_precision:.3f})")
    ax.plot(res.alphas, res.beta_recall, "s-", ms=3, label=f"beta-recall ({res.delta_recall:.3f})")
    ax.set_xlabel("alpha / beta")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------- entry point
def report(real: object, synthetic: object, holdout: object | None = None,
           target: str | None = None, *, metrics: Sequence[str] | None = None,
           max_rows: int = 2000, c2st_rows: int = 5000, coverage_rows: int = 3000,
           random_state: int | None = 0, kinds: object = None,
           n_threads: int | None = 1) -> QualityReport:
    """Compute a synthetic-data quality report.

    ``real`` is the data the generator was trained on; ``holdout`` (optional) is real data it
    never saw, used as the C2ST reference, the test set for TSTR and the baseline for DCR
    (``info["c2st_reference"]`` says which real rows C2ST used: against the training rows,
    samples that copy them read below 0.5, see :func:`c2st`). ``target`` enables TSTR.
    ``metrics`` selects from :data:`ALL_METRICS` (default: all). O(n²) metrics subsample:
    ``max_rows`` rows per side for MMD/energy, ``coverage_rows`` for coverage/privacy and
    ``c2st_rows`` for C2ST. ``n_threads`` caps OpenMP/BLAS threads for the model fits; the
    default 1 keeps timings predictable (OpenMP spin-waiting on busy small machines made the
    fits 10x slower in our benchmark); ``None`` uses the library defaults. Column kinds come
    from the dtypes unless ``kinds`` declares them (a mapping, a forestgen ``Schema`` or a
    fitted forestgen model; see :func:`forestgen.metrics._prep.infer_schema`).
    """
    chosen = list(ALL_METRICS) if metrics is None else list(metrics)
    unknown = sorted(set(chosen) - set(ALL_METRICS))
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(ALL_METRICS)}")
    real, synthetic, holdout = prepare(real, synthetic, holdout, names=["synthetic", "holdout"])
    if target is not None and str(target) not in real.columns:
        raise ValueError(f"target column {target!r} not in the data")
    schema = infer_schema(real, kinds)
    kinds = {c: schema.kind(c) for c in schema.columns}
    rows: list[dict[str, object]] = []
    timings: dict[str, float] = {}
    seed = random_state

    def add(group: str, metric: str, value: float, column: str | None = None) -> None:
        rows.append({"group": group, "metric": metric, "column": column, "value": float(value),
                     "ideal": _IDEAL.get(metric, np.nan)})

    def timed(name: str, fn: Callable[[], object]) -> object:
        t0 = time.perf_counter()
        out = fn()
        timings[name] = time.perf_counter() - t0
        return out

    columns = assoc = c2 = ap = util = priv = None
    if "marginals" in chosen:
        columns = timed("marginals", lambda: marginal_distances(
            real, synthetic, kinds=kinds))
        for r in columns.itertuples(index=False):
            add("fidelity", r.metric, r.statistic, r.column)
        ks = columns.loc[columns["metric"] == "ks", "statistic"]
        tv = columns.loc[columns["metric"] == "tv", "statistic"]
        add("fidelity", "ks_mean", ks.mean() if len(ks) else np.nan)
        add("fidelity", "tv_mean", tv.mean() if len(tv) else np.nan)
    if "association" in chosen:
        assoc = timed("association", lambda: association_gap(
            real, synthetic, max_rows=20000, random_state=seed, kinds=kinds))
        add("fidelity", "association_gap_mean", assoc.gap)
        add("fidelity", "association_gap_max", assoc.max_gap)
    if "sdmetrics" in chosen:
        sdm = timed("sdmetrics", lambda: sdmetrics_quality(real, synthetic))
        add("fidelity", "sdmetrics_column_shapes", sdm.column_shapes)
        add("fidelity", "sdmetrics_column_pair_trends", sdm.column_pair_trends)
        add("fidelity", "sdmetrics_overall", sdm.overall)
    c2st_real = holdout if holdout is not None and len(holdout) >= 5 else real
    if "c2st" in chosen:
        c2 = timed("c2st", lambda: c2st(c2st_real, synthetic, max_rows=c2st_rows,
                                        random_state=seed, kinds=kinds,
                                        n_threads=n_threads))
        add("fidelity", "c2st_auc", c2.auc)
        add("fidelity", "c2st_auc_ci_low", c2.auc_ci[0])
        add("fidelity", "c2st_auc_ci_high", c2.auc_ci[1])
        add("fidelity", "c2st_accuracy", c2.accuracy)
    if "mmd" in chosen:
        add("fidelity", "mmd2", timed("mmd", lambda: mmd(real, synthetic, max_rows=max_rows,
                                                         random_state=seed)))
    if "energy" in chosen:
        add("fidelity", "energy_distance", timed("energy", lambda: energy_distance(
            real, synthetic, max_rows=max_rows, random_state=seed)))
    if "sliced_wasserstein" in chosen:
        add("fidelity", "sliced_wasserstein", timed("sliced_wasserstein", lambda: (
            sliced_wasserstein(real, synthetic, random_state=seed))))
    if "alpha_precision" in chosen:
        ap = timed("alpha_precision", lambda: alpha_precision_beta_recall(
            real, synthetic, max_rows=coverage_rows, random_state=seed))
        add("coverage", "alpha_precision_delta", ap.delta_precision)
        add("coverage", "beta_recall_delta", ap.delta_recall)
        add("coverage", "authenticity", ap.authenticity)
    if "nn_precision_recall" in chosen:
        nn = timed("nn_precision_recall", lambda: nn_precision_recall(
            real, synthetic, max_rows=coverage_rows, random_state=seed))
        add("coverage", "nn_precision", nn.precision)
        add("coverage", "nn_recall", nn.recall)
    if "tstr" in chosen and target is not None:
        util = timed("tstr", lambda: tstr(real, synthetic, target, test=holdout,
                                          random_state=seed, kinds=kinds,
                                          n_threads=n_threads))
        for name in util.trtr:
            add("utility", f"trtr_{name}", util.trtr[name], util.target)
            add("utility", f"tstr_{name}", util.tstr[name], util.target)
    if "dcr" in chosen:
        priv = timed("dcr", lambda: dcr(real, synthetic, holdout, max_rows=coverage_rows,
                                        random_state=seed))
        add("privacy", "dcr_share_closer_to_train", priv.share_closer_to_train)
        add("privacy", "dcr_share_below_holdout_p5", priv.share_below_holdout_p5)
        add("privacy", "dcr_synthetic_p5", priv.dcr_synthetic_p5)
        add("privacy", "dcr_holdout_p5", priv.dcr_holdout_p5)
        add("privacy", "nndr_synthetic_median", priv.nndr_synthetic_median)
        add("privacy", "nndr_holdout_median", priv.nndr_holdout_median)
        add("privacy", "exact_match_synthetic", priv.exact_match_synthetic)
        add("privacy", "exact_match_holdout", priv.exact_match_holdout)
        add("privacy", "copying_flag", float(priv.copying))
    if "rules" in chosen:  # the mappings that hold in every real row (adult's education)
        rv = timed("rules", lambda: rule_violations(real, synthetic))
        add("fidelity", "rule_violation_rate", rv.rate)
        for r in rv.table.itertuples(index=False):
            add("fidelity", "rule_violation_share", r.share, r.rule)
    table = pd.DataFrame(rows, columns=["group", "metric", "column", "value", "ideal"])
    table["column"] = table["column"].astype(object).where(table["column"].notna(), None)
    rng = np.random.default_rng(random_state)
    info = {"n_real": len(real), "n_synthetic": len(synthetic),
            "n_holdout": None if holdout is None else len(holdout),
            "c2st_reference": "holdout" if c2st_real is holdout else "training",
            "n_columns": len(schema.columns), "n_numeric": len(schema.numeric),
            "n_categorical": len(schema.categorical), "target": target,
            "kinds": kinds}
    return QualityReport(table=table, columns=columns, association=assoc, c2st=c2,
                         alpha_precision=ap, utility=util, privacy=priv, timings=timings,
                         info=info, _real_sample=subsample(real, 5000, rng),
                         _synthetic_sample=subsample(synthetic, 5000, rng))
