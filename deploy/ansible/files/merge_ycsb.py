#!/usr/bin/env python3
"""Merges the nova_ycsb results of several client hosts into one table and one time series.

    merge_ycsb.py RESULTS_DIR [HOST...]

RESULTS_DIR holds one directory per client host (what ycsb.yml fetched), each with
summary.txt (nova_ycsb's report: -p exportfile) and timeseries.csv (-p timeseries). Only the
HOSTs' directories are merged (ycsb.yml names the hosts of this run, so the directories an
earlier run left, e.g. of a host since removed, add nothing); without HOSTs, every
subdirectory. Writes:

- RESULTS_DIR/summary.txt: one row per host and a TOTAL row: run time, throughput,
  operations and failures per operation type, and the dataintegrity verdicts ([VERIFY]
  Return=OK / UNEXPECTED_STATE / ERROR). TOTAL throughput is the sum of the hosts'.
- RESULTS_DIR/timeseries.csv: the hosts' per-second rows added up second by second (each
  host's clock starts with its own run; ycsb.yml starts them together). Operation counts are
  sums; a p50 is the hosts' operation-weighted mean and a p99 the hosts' maximum: an
  approximation (exact percentiles need the hosts' histograms), an upper bound for p99.

Prints the table. Exit status 1 when a host's files are missing or malformed, 3 when any
operation failed or any read returned unexpected data (the table still is written).
"""

import csv
import math
import os
import re
import sys

SUMMARY_LINE = re.compile(r"^\[([A-Z_-]+)\], ([^,]+), (.+)$")


def read_summary(path):
    """Returns {(section, metric): value string} of a nova_ycsb report."""
    out = {}
    with open(path) as f:
        for line in f:
            m = SUMMARY_LINE.match(line.strip())
            if m:
                out[(m.group(1), m.group(2))] = m.group(3)
    if ("OVERALL", "Throughput(ops/sec)") not in out:
        raise ValueError(f"{path}: no [OVERALL] Throughput line")
    return out


def read_series(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][:3] != ["second", "ops", "failed_ops"]:
        raise ValueError(f"{path}: not a nova_ycsb time series")
    return rows[0], [[float(v) for v in r] for r in rows[1:] if r]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 1
    root = argv[1]
    if len(argv) > 2:
        hosts = sorted(set(argv[2:]))
    else:
        hosts = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    if not hosts:
        print(f"merge_ycsb: no host directories in {root}", file=sys.stderr)
        return 1
    ops = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"]
    table = []
    header = None
    buckets = {}  # second (int) -> list of per-host rows
    bad = False
    try:
        for h in hosts:
            s = read_summary(os.path.join(root, h, "summary.txt"))
            row = {"host": h,
                   "runtime_ms": float(s.get(("OVERALL", "RunTime(ms)"), 0)),
                   "ops_per_s": float(s[("OVERALL", "Throughput(ops/sec)")])}
            for op in ops:
                row[op] = int(float(s.get((op, "Operations"), 0)))
                row[op + "-FAILED"] = int(float(s.get((op + "-FAILED", "Operations"), 0)))
            for verdict in ["OK", "UNEXPECTED_STATE", "ERROR"]:
                row["VERIFY " + verdict] = int(float(s.get(("VERIFY", "Return=" + verdict), 0)))
            table.append(row)
            hdr, rows = read_series(os.path.join(root, h, "timeseries.csv"))
            if header is None:
                header = hdr
            elif hdr != header:
                raise ValueError(f"{h}: time series columns differ from {hosts[0]}'s")
            for r in rows:
                buckets.setdefault(int(math.ceil(r[0] - 1e-9)), []).append(r)
    except (OSError, ValueError, KeyError) as e:
        print(f"merge_ycsb: {e}", file=sys.stderr)
        return 1

    total = {"host": "TOTAL", "runtime_ms": max(r["runtime_ms"] for r in table),
             "ops_per_s": sum(r["ops_per_s"] for r in table)}
    for k in table[0]:
        if k not in total:
            total[k] = sum(r[k] for r in table)
    table.append(total)
    cols = ["host", "runtime_ms", "ops_per_s"] + [
        k for k in table[0] if k not in ("host", "runtime_ms", "ops_per_s") and any(r[k] for r in table)]
    widths = [max(len(c), max(len(fmt(r[c])) for r in table)) for c in cols]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    for r in table:
        lines.append("  ".join(fmt(r[c]).ljust(w) for c, w in zip(cols, widths)))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(root, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")

    with open(os.path.join(root, "timeseries.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for sec in sorted(buckets):
            rows = buckets[sec]
            out = [f"{sec:.3f}", sum(r[1] for r in rows), sum(r[2] for r in rows)]
            for i in range(3, len(header), 3):  # <op>_ops, <op>_p50_us, <op>_p99_us
                n = sum(r[i] for r in rows)
                p50 = sum(r[i] * r[i + 1] for r in rows) / n if n else 0
                out += [n, round(p50), max(r[i + 2] for r in rows)]
            w.writerow([v if isinstance(v, str) else int(v) for v in out])

    failed = sum(total[op + "-FAILED"] for op in ops)
    wrong = total["VERIFY UNEXPECTED_STATE"] + total["VERIFY ERROR"]
    if failed or wrong:
        print(f"merge_ycsb: {failed} failed operations, {wrong} reads with unexpected data",
              file=sys.stderr)
        bad = True
    return 3 if bad else 0


def fmt(v):
    return f"{v:.1f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
