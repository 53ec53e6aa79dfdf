"""Shared pieces of the summaries of bench/tls.sh and bench/h2.sh (floodgate against nginx):
reading a run's results.tsv and meta.txt, medians over rounds, floodgate / nginx ratios
divided within each round, number formatting, and the tables (aligned text, markdown,
summary.tsv). The scripts' inline Python imports it; what is specific to one benchmark
(columns, notes, checks) stays in the script."""
import csv
import os
import statistics


def load(out):
    """rows of results.tsv (dicts) and meta.txt (key -> value) of the results directory out"""
    rows = list(csv.DictReader(open(os.path.join(out, "results.tsv")), delimiter="\t"))
    meta = dict(l.rstrip("\n").split("\t", 1) for l in open(os.path.join(out, "meta.txt")) if "\t" in l)
    return rows, meta


def present(rows, meta):
    """the scenarios (in the run's order) and servers (nginx first) that have rows"""
    scen = [s for s in meta["scenarios"].split() if any(r["scenario"] == s for r in rows)]
    servers = [s for s in ("nginx", "floodgate") if any(r["server"] == s for r in rows)]
    return scen, servers


def med(rows, s, sc, f):
    """median of column f over the rounds of server s in scenario sc; None without rows"""
    v = [float(r[f]) for r in rows if r["server"] == s and r["scenario"] == sc]
    return statistics.median(v) if v else None


def ratios(rows, sc, f):
    """floodgate / nginx of column f, divided within each round: (median, min, max) or None"""
    by = {}
    for r in rows:
        if r["scenario"] == sc:
            by.setdefault(r["round"], {})[r["server"]] = float(r[f])
    v = [d["floodgate"] / d["nginx"] for d in by.values()
         if "floodgate" in d and "nginx" in d and d["nginx"] > 0]
    return (statistics.median(v), min(v), max(v)) if v else None


def summarize(rows, scen, servers, fields, ratio_of):
    """one record per scenario: "{server}_{field}" medians of fields, and for each
    key: column of ratio_of, the ratios() of that column under key"""
    summary = []
    for sc in scen:
        rec = {"scenario": sc}
        for s in servers:
            for f in fields:
                rec[f"{s}_{f}"] = med(rows, s, sc, f)
        for key, f in ratio_of.items():
            rec[key] = ratios(rows, sc, f)
        summary.append(rec)
    return summary


def n(x, d=0):
    """x with thousands separators (d = 0) or d decimals; "-" for None"""
    return "-" if x is None else (f"{x:,.0f}" if d == 0 else f"{x:.{d}f}")


def rt(x):
    """a ratios() result as "median (min-max)" """
    return "-" if x is None else f"{x[0]:.3f} ({x[1]:.2f}-{x[2]:.2f})"


def rmed(x):
    """the median of a ratios() result, 3 decimals"""
    return n(x and x[0], 3)


def rrange(x):
    """the per-round range of a ratios() result, "min-max" """
    return "-" if not x else f"{x[1]:.3f}-{x[2]:.3f}"


def write_summary(path, summary, cols, ratio_cols):
    """summary.tsv: per scenario, the medians cols (record keys), then the req/s ratio
    (record key ratio_req_s) with its range, then the median of each ratio in ratio_cols,
    (column name, record key) pairs"""
    with open(path, "w") as f:
        head = ["scenario"] + cols + ["ratio_req_s", "ratio_req_s_min", "ratio_req_s_max"]
        f.write("\t".join(head + [c for c, _ in ratio_cols]) + "\n")
        for rec in summary:
            rr = rec["ratio_req_s"]
            vals = [rec["scenario"]] + [n(rec[c], 3).replace(",", "") for c in cols]
            vals += [n(rr and rr[0], 3), n(rr and rr[1], 3), n(rr and rr[2], 3)]
            vals += [rmed(rec[k]) for _, k in ratio_cols]
            f.write("\t".join(vals) + "\n")


def aligned(hdr, lines):
    """hdr and lines as text rows: the first column left-aligned, the others right-aligned"""
    w = [max(len(str(x)) for x in col) for col in zip(hdr, *lines)]
    return ["  ".join(str(x).ljust(w[0]) if i == 0 else str(x).rjust(w[i]) for i, x in enumerate(l))
            for l in [hdr] + lines]


def markdown(hd, lines):
    """a markdown table: two left-aligned columns (scenario, what), the others right-aligned"""
    m = ["| " + " | ".join(hd) + " |", "|---|---|" + "---:|" * (len(hd) - 2)]
    return m + ["| " + " | ".join(c) + " |" for c in lines]


def details(meta, keys, prefixes):
    """meta.txt's keys (those present), then every key starting with one of prefixes, as
    "key: value" lines"""
    return ([f"{k}: {meta[k]}" for k in keys if k in meta] +
            [f"{k}: {meta[k]}" for k in sorted(meta) if k.startswith(prefixes)])
