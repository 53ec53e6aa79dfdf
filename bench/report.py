#!/usr/bin/env python3
"""Writes docs/benchmarks.md from one run of the peer harness and one run of micro_bench.

    bench/report.py PEERS_RESULT_DIR MICRO_JSON

PEERS_RESULT_DIR is what bench/peers.sh wrote (results.tsv, summary.tsv, table.txt);
MICRO_JSON is `build/micro_bench --benchmark_format=json` output. The prose comes from
bench/benchmarks.md.in; this script fills in the tables, the targets and the plot
(docs/bench/peers.svg, drawn with gnuplot). Standard library only.
"""
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
ORDER = ["nginx-plain", "nginx-lr-high", "nginx-lr-low", "node-rlf-high", "node-rlf-low",
         "node-luatb-high", "fg-pass", "fg-mem", "fg-redis-leased", "fg-redis", "fg-redis3",
         "fg-redis-low", "fg-mem-low"]
# bench/peers.sh runs the leased row as the harness's PRODUCT_CMD row, which it calls "product".
RENAME = {"product": "fg-redis-leased"}
WHAT = {
    "nginx-plain": "nginx proxy_pass (keep-alive upstream)",
    "nginx-lr-high": "nginx limit_req, nothing refused (local only)",
    "nginx-lr-low": "nginx limit_req, ~all refused (429 path)",
    "node-rlf-high": "Node http-proxy + rate-limiter-flexible + Redis",
    "node-rlf-low": "the same, ~all refused",
    "node-luatb-high": "Node http-proxy + the harness's plain Lua token bucket (EVALSHA)",
    "fg-redis-leased": "**floodgate**, the same bucket with `lease: {size: 100, ttl: 2s}`",
    "fg-pass": "**floodgate**, no limits",
    "fg-mem": "**floodgate**, token bucket, embedded store",
    "fg-redis": "**floodgate**, token bucket in Redis",
    "fg-redis3": "**floodgate**, 3 limits in Redis (one script)",
    "fg-redis-low": "**floodgate**, Redis, ~all refused (429 path)",
    "fg-mem-low": "**floodgate**, embedded, ~all refused",
}


def read_tsv(path):
    with open(path) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        r["target"] = RENAME.get(r["target"], r["target"])
    return rows


def per_round(results, a, b, field="ratio"):
    """Median over rounds of a/b, each round's pair taken within that round."""
    rounds = {}
    for r in results:
        rounds.setdefault(r["round"], {})[r["target"]] = r
    vals = []
    for rows in rounds.values():
        if a in rows and b in rows and float(rows[b][field]) > 0:
            vals.append(float(rows[a][field]) / float(rows[b][field]))
    if not vals:
        return None, []
    return statistics.median(vals), vals


def median_of(results, target, field):
    vals = [float(r[field]) for r in results if r["target"] == target]
    return statistics.median(vals) if vals else None


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def targets_table(results):
    rows = []

    def ratio_row(name, text, a, b, goal, field="ratio", higher=True):
        m, vals = per_round(results, a, b, field)
        met = None if m is None else (m >= goal if higher else m <= goal)
        rng = f"{min(vals):.3f}-{max(vals):.3f}" if vals else "-"
        rows.append((name, text, f"{a} / {b}", fmt(m), rng,
                     (">= " if higher else "<= ") + f"{goal}", met))

    ratio_row("P1", "pass-through vs nginx proxy_pass", "fg-pass", "nginx-plain", 1.0)
    ratio_row("P2", "Redis-checked vs own pass-through", "fg-redis", "fg-pass", 0.8)
    ratio_row("P2", "Redis-checked vs nginx limit_req", "fg-redis", "nginx-lr-high", 1.0)
    ratio_row("P3", "429 path vs nginx limit_req 429 path", "fg-redis-low", "nginx-lr-low", 1.0)
    refused = median_of(results, "fg-redis-low", "non2xx")
    total = median_of(results, "fg-redis-low", "requests")
    scripts = median_of(results, "fg-redis-low", "redis_script_req")
    per_refused = None if not (refused and total and scripts is not None) else scripts * total / refused
    rows.append(("P3", "script calls per refused request, single-key flood", "fg-redis-low",
                 fmt(per_refused, 4), "-", "<= 0.01",
                 None if per_refused is None else per_refused <= 0.01))
    ratio_row("P4", "p99 through floodgate vs nginx proxy_pass p99", "fg-pass", "nginx-plain", 1.0,
              field="p99_ms", higher=False)
    ratio_row("P4", "p99, Redis-checked, vs nginx proxy_pass p99", "fg-redis", "nginx-plain", 1.0,
              field="p99_ms", higher=False)
    ratio_row("P5", "Redis-checked vs Node + Redis", "fg-redis", "node-rlf-high", 4.0)
    us = median_of(results, "fg-redis", "redis_us_req")
    rows.append(("P6", "Redis CPU per decision, us", "fg-redis", fmt(us, 1), "-", "<= 8",
                 None if us is None else us <= 8.0))
    # Issue 18: leased decisions, and an exact path that batches a loop turn's decisions.
    ratio_row("L1", "leased vs embedded store", "fg-redis-leased", "fg-mem", 0.95)
    ratio_row("L2", "Redis CPU per decision vs the harness's plain Lua token bucket",
              "fg-redis", "node-luatb-high", 0.5, field="redis_us_req", higher=False)
    for t in ("fg-redis", "fg-redis3"):
        s = median_of(results, t, "redis_script_req")
        rows.append(("L3", f"script calls per decision ({t})", t, fmt(s), "-", "< 1",
                     None if s is None else s < 1.0))
    # Issue 36: the speed lead back on the one driver (HTTP/2's targets: section 7, bench/h2.sh).
    ratio_row("S1", "pass-through vs nginx proxy_pass", "fg-pass", "nginx-plain", 1.1)
    ratio_row("S1", "CPU per pass-through request vs nginx proxy_pass's", "fg-pass", "nginx-plain",
              1.0, field="target_us_req", higher=False)
    ratio_row("S2", "429 path, embedded store, vs nginx limit_req 429 path", "fg-mem-low",
              "nginx-lr-low", 1.0)
    ratio_row("S2", "429 path, Redis, vs nginx limit_req 429 path", "fg-redis-low", "nginx-lr-low",
              1.0)
    ratio_row("S3", "embedded store vs own pass-through", "fg-mem", "fg-pass", 0.95)
    ratio_row("S3", "leased hot key vs embedded store", "fg-redis-leased", "fg-mem", 0.95)
    ratio_row("S4", "Redis-checked: floodgate's CPU per request vs its pass-through's", "fg-redis",
              "fg-pass", 1.15, field="target_us_req", higher=False)
    ratio_row("S4", "Redis-checked: throughput vs own pass-through (carries Redis's CPU)",
              "fg-redis", "fg-pass", 0.0)
    rows[-1] = rows[-1][:5] + ("reported", None)
    ratio_row("S4", "Redis CPU per decision vs the harness's plain Lua token bucket", "fg-redis",
              "node-luatb-high", 0.35, field="redis_us_req", higher=False)
    out = ["| target | what | rows | median | per-round range | goal | met |",
           "|---|---|---|---:|---|---|---|"]
    for name, text, pair, m, rng, goal, met in rows:
        verdict = "n/a" if met is None else ("**yes**" if met else "no")
        out.append(f"| {name} | {text} | {pair} | {m} | {rng} | {goal} | {verdict} |")
    return "\n".join(out)


def rows_table(summary):
    by = {r["target"]: r for r in summary}
    out = ["| row | what | req/s | ratio to origin | p50 ms | p99 ms | refused % | proxy CPU us/req "
           "| Redis CPU us/req | Redis cmds/req | scripts/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in ["origin"] + ORDER:
        if t not in by:
            continue
        r = by[t]
        what = "nginx return 200 (direct, no proxy)" if t == "origin" else WHAT.get(t, "")
        out.append(f"| {t} | {what} | {int(float(r['req_s'])):,} | {r['ratio']} | {r['p50_ms']} | "
                   f"{r['p99_ms']} | {r['non2xx_pct']} | {r['self_us']} | {r['redis_us']} | "
                   f"{r['redis_cmd_req']} | {r['redis_script_req']} |")
    return "\n".join(out)


def plot(summary, svg):
    by = {r["target"]: r for r in summary}
    names = [t for t in ORDER if t in by]
    data = os.path.join(os.path.dirname(svg), "peers.dat")
    with open(data, "w") as f:
        for i, t in enumerate(names):
            f.write(f"{i} {t} {float(by[t]['req_s']):.0f} {float(by[t]['p99_ms']):.2f}\n")
    script = f"""
set terminal svg size 960,480 dynamic font 'sans,11'
set output '{svg}'
set title 'floodgate and peers: throughput (bars) and p99 latency (points), one run, medians'
set style fill solid 0.8 border -1
set boxwidth 0.6
set xtics rotate by -35 nomirror
set ylabel 'requests per second'
set y2label 'p99 ms'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set grid ytics
set key top left
plot '{data}' using 1:3:xtic(2) with boxes lc rgb '#4a7fb5' title 'req/s', \\
     '' using 1:4 axes x1y2 with points pt 7 ps 1.2 lc rgb '#c0392b' title 'p99 ms'
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)


def micro_table(path):
    with open(path) as f:
        data = json.load(f)
    out = ["| benchmark | time per op | ops per second | note |", "|---|---:|---:|---|"]
    standard = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
                "repetitions", "repetition_index", "threads", "iterations", "real_time",
                "cpu_time", "time_unit", "items_per_second", "label", "error_occurred",
                "error_message"}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        ns = b["real_time"] * scale
        rate = b.get("items_per_second")
        rate_text = f"{rate / 1e6:.2f} M" if rate else "-"
        notes = [b["label"]] if b.get("label") else []
        notes += [f"{k} = {v:,.0f}" for k, v in b.items()
                  if k not in standard and isinstance(v, (int, float))]
        time_text = "-" if notes and not rate and ns > 1e6 else f"{ns:,.0f} ns"
        out.append(f"| `{b['name']}` | {time_text} | {rate_text} | {'; '.join(notes)} |")
    ctx = data.get("context", {})
    out.append("")
    out.append(f"({ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; floodgate "
               f"built RelWithDebInfo; one run. Google Benchmark's own note that its library "
               f"was built as \"{ctx.get('library_build_type', '?')}\" is about Debian's "
               f"package, not the code measured.)")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    res_dir, micro = sys.argv[1], sys.argv[2]
    results = read_tsv(os.path.join(res_dir, "results.tsv"))
    summary = read_tsv(os.path.join(res_dir, "summary.tsv"))
    os.makedirs(os.path.join(DOCS, "bench"), exist_ok=True)
    plot(summary, os.path.join(DOCS, "bench", "peers.svg"))
    shutil.copy(os.path.join(res_dir, "table.txt"), os.path.join(DOCS, "bench", "peers-table.txt"))
    meta = ""
    meta_path = os.path.join(res_dir, "meta.txt")
    if os.path.exists(meta_path):
        meta = open(meta_path).read().strip()
    rounds = len({r["round"] for r in results})
    with open(os.path.join(ROOT, "bench", "benchmarks.md.in")) as f:
        text = f.read()
    text = (text.replace("{{ROUNDS}}", str(rounds))
                .replace("{{TARGETS}}", targets_table(results))
                .replace("{{ROWS}}", rows_table(summary))
                .replace("{{MICRO}}", micro_table(micro))
                .replace("{{META}}", meta))
    with open(os.path.join(DOCS, "benchmarks.md"), "w") as f:
        f.write(text)
    print("wrote docs/benchmarks.md, docs/bench/peers.svg, docs/bench/peers-table.txt")


if __name__ == "__main__":
    main()
