#!/usr/bin/python3
"""Checks docs/grafana-dashboard.json without a browser or a Grafana.

Usage: dashboard_check.py DASHBOARD.json METRICS.txt RULES_OUT.yml

- the file is JSON with a title, a uid, a `datasource` and an `instance` variable, and panels
  that each have a type, a title, a place on the grid (no two overlapping) and targets;
- every metric a query reads is a series floodgate exported in METRICS.txt (a scrape of the
  binary's /metrics), and every label a query selects on (`{label=...}`) or groups by
  (`by (...)`) is one that series carries (or one Prometheus adds at scrape: instance, job);
- every query, with Grafana's variables filled in, is written to RULES_OUT.yml as a recording
  rule, for `promtool check rules` to parse as PromQL.
Prints what it checked; exits 1 with the reasons on the first failures.
"""
import json
import re
import sys


def main():
    dashboard_path, metrics_path, rules_path = sys.argv[1:4]
    errors = []
    with open(dashboard_path) as f:
        dash = json.load(f)
    exported = set()
    labels = {}  # series name -> the label names it was exported with
    with open(metrics_path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name = re.split(r"[{ ]", line, maxsplit=1)[0]
                exported.add(name)
                found = labels.setdefault(name, set())
                body = re.match(r"[^{ ]+\{(.*)\}", line)
                if body:
                    found.update(re.findall(r'(\w+)="', body.group(1)))
    for key in ("title", "uid", "panels", "templating"):
        if key not in dash:
            errors.append(f"no {key}")
    variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    for needed in ("datasource", "instance"):
        if needed not in variables:
            errors.append(f"no ${needed} variable")
    cells = {}
    rules = []
    metrics_read = set()
    for panel in dash.get("panels", []):
        where = f"panel {panel.get('id')} ({panel.get('title')})"
        for key in ("type", "title", "gridPos", "targets", "datasource"):
            if key not in panel:
                errors.append(f"{where}: no {key}")
        g = panel.get("gridPos", {})
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in cells:
                    errors.append(f"{where}: overlaps {cells[(x, y)]}")
                    break
                cells[(x, y)] = where
        if g.get("x", 0) + g.get("w", 0) > 24:
            errors.append(f"{where}: wider than the grid")
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            if not expr:
                errors.append(f"{where}: a target without an expr")
                continue
            for var in re.findall(r"\$\{?(\w+)", expr):
                if var not in variables and not var.startswith("__"):
                    errors.append(f"{where}: ${var} is not a variable")
            read_here = set()
            for name in re.findall(r"\b((?:floodgate|process)_[a-z0-9_]+)\b", expr):
                metrics_read.add(name)
                read_here.add(name)
                if name not in exported:
                    errors.append(f"{where}: {name} is not exported")
            # Labels Prometheus adds to every series it scrapes.
            scraped = {"instance", "job"}
            for name, selector in re.findall(r"\b((?:floodgate|process)_[a-z0-9_]+)\{([^}]*)\}", expr):
                for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector):
                    if name in exported and label not in labels.get(name, set()) | scraped:
                        errors.append(f"{where}: {name} has no label {label}")
            carried = set(scraped)
            for name in read_here:
                carried |= labels.get(name, set())
            for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
                for label in re.findall(r"\w+", group):
                    if label not in carried:
                        errors.append(f"{where}: groups by {label}, which no series it reads has")
            filled = expr.replace("$__rate_interval", "5m").replace("$instance", ".*")
            rules.append((f"dashboard:panel_{panel.get('id')}_{target.get('refId')}", filled))
    with open(rules_path, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for record, expr in rules:
            f.write(f"      - record: {record}\n        expr: {json.dumps(expr)}\n")
    if errors:
        print("\n".join(errors[:20]))
        return 1
    print(f"{len(dash['panels'])} panels, {len(rules)} queries, "
          f"{len(metrics_read)} metrics read, all exported with the labels the queries use")
    return 0


if __name__ == "__main__":
    sys.exit(main())
