"""Score one synthetic sample against its training and test tables with forestgen.metrics.

C2ST compares the synthetic rows with the held-out test rows, real rows the generator never
saw: against the training rows a generator that returns near-copies of them would read below
0.5 (the classifier trains on copies of the real rows it is tested on). How close the samples
sit to the training rows is reported separately, as DCR against the same held-out baseline.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

import forestgen.metrics as fm
from forestgen.metrics._prep import category_strings, numeric_values


def _read(path: str, columns: list[str], kinds: dict) -> pd.DataFrame:
    df = pd.read_csv(path, keep_default_na=False, na_values=["", "NA", "nan", "NaN", "<NA>"])
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"sample lacks column(s) {missing}")
    df = df[columns].copy()
    for c in columns:
        if kinds[c] == "categorical":
            df[c] = df[c].astype(object).where(df[c].notna(), np.nan).map(
                lambda v: v if not isinstance(v, float) else (str(int(v)) if v == int(v) else
                                                              str(v)),
                na_action="ignore")
        else:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df


def rule_scores(train: pd.DataFrame, syn: pd.DataFrame) -> dict:
    """The rules that hold in every training row (mappings such as adult's education ->
    education-num, thresholds, nested missing entries; :func:`forestgen.metrics.rule_violations`)
    and the share of synthetic rows breaking each, with each rule's kind."""
    rv = fm.rule_violations(train, syn)
    return {"rule_violation_rate": rv.rate, "rules_detected": rv.n_rules,
            "rule_violations": {r.rule: round(r.share, 4) for r in rv.table.itertuples()},
            "rule_kinds": {r.rule: r.kind for r in rv.table.itertuples()}}


def rescore_rules(rec: dict) -> dict:
    """:func:`rule_scores` of a cell again from its stored training and synthetic files."""
    meta = rec["meta_full"]
    kinds = {c: "categorical" if s["kind"] in ("categorical", "ordered", "bool") else "numeric"
             for c, s in meta["columns"].items()}
    cols = list(meta["columns"])
    return rule_scores(_read(rec["train"], cols, kinds), _read(rec["synth"], cols, kinds))


def score_cell(data: dict, synth_path: str, kinds: dict, seed: int) -> dict:
    """Every leaderboard metric for one sample (all with forestgen.metrics or plain counts)."""
    meta = data["meta"]
    cols = list(meta["columns"])
    train = _read(data["train"], cols, kinds)
    test = _read(data["test"], cols, kinds)
    syn = _read(synth_path, cols, kinds)
    out: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fm.SmallSampleWarning)
        c2 = fm.c2st(test, syn, kinds=kinds, random_state=seed, n_threads=1)
        out.update(c2st_auc=c2.auc, c2st_ci=list(c2.auc_ci), c2st_model=c2.classifier,
                   c2st_reference="held-out test rows", c2st_n=c2.n_real)
        target = meta["target"]
        u = fm.tstr(train, syn, target, test=test, kinds=kinds, random_state=seed, n_threads=1)
        key = "auc" if u.task == "classification" else "r2"
        row = u.table.set_index("metric").loc[key]
        out.update(tstr_metric=key, tstr=u.tstr[key], trtr=u.trtr[key],
                   tstr_gap_ci=[row.gap_ci_low, row.gap_ci_high])
    out["warnings"] = sorted({str(w.message) for w in caught
                              if issubclass(w.category, fm.SmallSampleWarning)})
    d = fm.dcr(train, syn, test, random_state=seed)
    out.update(dcr_closer_to_train=d.share_closer_to_train,
               dcr_synthetic_p5=d.dcr_synthetic_p5, dcr_holdout_p5=d.dcr_holdout_p5,
               exact_copy_rate=d.exact_match_synthetic,
               exact_copy_rate_holdout=d.exact_match_holdout, copying=d.copying)
    out.update(rule_scores(train, syn))
    marg = fm.marginal_distances(train, syn, kinds=kinds)
    ks = marg.loc[marg.metric == "ks", "statistic"]
    tv = marg.loc[marg.metric == "tv", "statistic"]
    out.update(ks_mean=float(ks.mean()) if len(ks) else None,
               tv_mean=float(tv.mean()) if len(tv) else None,
               per_column={r.column: round(float(r.statistic), 4)
                           for r in marg.itertuples()})
    gap = fm.association_gap(train, syn, kinds=kinds, max_rows=5000, random_state=seed)
    num = [c for c in cols if kinds[c] == "numeric"]
    cat = [c for c in cols if kinds[c] == "categorical"]
    m = gap.matrix

    def pair_mean(a, b):
        vals = [m.loc[x, y] for i, x in enumerate(a) for y in b if (x != y and
                (a is not b or b.index(y) > i))]
        return float(np.mean(vals)) if vals else None

    out.update(corr_gap=pair_mean(num, num), contingency_gap=pair_mean(cat, cat),
               mixed_gap=pair_mean(num, cat))
    oor_rows = np.zeros(len(syn), dtype=bool)
    oor_cols = []
    for c in num:
        lo, hi = np.nanmin(numeric_values(train[c])), np.nanmax(numeric_values(train[c]))
        x = numeric_values(syn[c])
        bad = (x < lo) | (x > hi)
        if bad.any():
            oor_cols.append(c)
        oor_rows |= bad
    out.update(out_of_range_rows=float(oor_rows.mean()), out_of_range_columns=oor_cols)
    # share of numeric values sitting exactly on the training minimum or maximum, beyond the
    # training rows' own share there: a sampler that diverges and is clipped (or whose quantile
    # transform saturates) piles values on the bounds
    piled = {}
    for c in num:
        t, x = numeric_values(train[c]), numeric_values(syn[c])
        t, x = t[~np.isnan(t)], x[~np.isnan(x)]
        if len(t) and len(x):
            lo, hi = t.min(), t.max()
            excess = np.mean((x == lo) | (x == hi)) - np.mean((t == lo) | (t == hi))
            if excess > 0.05:
                piled[c] = round(float(excess), 3)
    out["bound_pile_columns"] = piled
    unseen = []
    for c in cat:
        seen = set(category_strings(train[c]))
        unseen.append(float(np.mean([v not in seen for v in category_strings(syn[c])])))
    out["unseen_level_rate"] = float(np.mean(unseen)) if unseen else 0.0
    out["nan_rate_gap"] = float(np.mean(np.abs(train.isna().mean().to_numpy()
                                               - syn.isna().mean().to_numpy())))
    return out
