#!/usr/bin/env python3
"""MTTF of a table and of the storage layer per availability mode (docs/stoc.md,
"Availability model"; the paper's Table 4.2, section 4.4.4.1).

The paper's model is Patterson, Gibson and Katz's RAID model: a group of n disks that
survives f failures loses data when f + 1 of them are down at once; with exponential
failures (mean MTTF) and repairs much shorter than MTTF, its mean time to data loss is

    group(n, f) = MTTF^(f+1) / (n (n-1) ... (n-f) * MTTR^f)

(f = 0: MTTF / n; f = 1: the RAID paper's MTTF^2 / (n (n-1) MTTR)). Parts that each lose
the table (fragments in series) add their loss rates. The storage layer is beta / rho such
independent stripes in series (RAID's "nG groups").

Prints the markdown tables of docs/stoc.md. No arguments; edit the constants below.
"""

HOURS_PER_DAY = 24.0
HOURS_PER_MONTH = 30 * HOURS_PER_DAY   # reproduces the paper's 13 days, 26 days, 91 years
HOURS_PER_YEAR = 365 * HOURS_PER_DAY

MTTF_STOC = 4.3 * HOURS_PER_MONTH  # the paper's StoC MTTF (Ford et al., OSDI 2010)
MTTR = 1.0                         # hours to repair a StoC's data (the paper's assumption)
BETA = 10                          # data StoCs of the storage layer (the paper's 10)
META_REPLICAS = 2                  # copies of the meta fragment and filter in mode hybrid
RHOS = (1, 3, 5)                   # the paper's rows

# The paper's figures (Table 4.2 and the text after it), None where it gives none.
PAPER = {
    ("none", 1): ("4.3 months", "13 days"), ("none", 3): ("1.4 months", "13 days"),
    ("none", 5): ("26 days", "13 days"),
    ("replicas R=2", 1): ("554 years", "55.4 years"),
    ("parity m=1", 1): ("554 years", "54 years"), ("parity m=1", 3): ("91 years", "30 years"),
    ("parity m=1", 5): ("36 years", "18.5 years"),
}


def group(n, f):
    """Mean hours until f + 1 of n StoCs are down together (n > f)."""
    denominator = 1.0
    for i in range(f + 1):
        denominator *= n - i
    return MTTF_STOC ** (f + 1) / (denominator * MTTR ** f)


def series(*mttfs):
    """MTTF of parts each of which loses the whole."""
    return 1.0 / sum(1.0 / t for t in mttfs)


def modes(rho):
    """(mode, table MTTF counting data fragments only, whole-table MTTF, space overhead).

    Whole table: rho data fragments and the meta fragment (index) with the filter, which
    share one file, each on a StoC of its own (the worst case of placement)."""
    r2, r3 = group(2, 1), group(3, 2)
    meta = group(META_REPLICAS, META_REPLICAS - 1)
    return [
        ("none", group(rho, 0), group(rho + 1, 0), 0.0),
        ("replicas R=2", r2 / rho, r2 / (rho + 1), 1.0),
        ("replicas R=3", r3 / rho, r3 / (rho + 1), 2.0),
        # Mode parity: the meta fragment followed by the filter is one column of the stripe.
        ("parity m=1", group(rho + 1, 1), group(rho + 2, 1), 1.0 / rho),
        ("parity m=2", group(rho + 2, 2), group(rho + 3, 2), 2.0 / rho),
        # Mode hybrid: parity over the data, replicas of the meta fragment and filter.
        ("hybrid m=1", group(rho + 1, 1), series(group(rho + 1, 1), meta), 1.0 / rho),
    ]


def human(hours):
    if hours < HOURS_PER_MONTH:
        return f"{hours / HOURS_PER_DAY:.3g} days"
    if hours < HOURS_PER_YEAR:
        return f"{hours / HOURS_PER_MONTH:.2g} months"
    return f"{hours / HOURS_PER_YEAR:,.3g} years" if hours < 1000 * HOURS_PER_YEAR \
        else f"{hours / HOURS_PER_YEAR:,.0f} years"


def main():
    print("| rho | mode | MTTF_SSTable (data) | MTTF_storage | space overhead | "
          "paper (SSTable / storage) | whole table (+ meta, filter) |")
    print("|---|---|---|---|---|---|---|")
    for rho in RHOS:
        for mode, data, whole, overhead in modes(rho):
            storage = data / (BETA / rho)
            paper = PAPER.get((mode, rho))
            paper = f"{paper[0]} / {paper[1]}" if paper else "-"
            print(f"| {rho} | {mode} | {human(data)} | {human(storage)} | {overhead:.0%} | "
                  f"{paper} | {human(whole)} |")
    print()
    print("Storage layer of N StoCs when every f + 1 of them share some table "
          "(random scattering of many tables): group(N, f)")
    print()
    print("| N | f = 0 (none) | f = 1 (R=2, m=1, hybrid) | f = 2 (R=3, m=2) |")
    print("|---|---|---|---|")
    for n in (4, 10, 20):
        print(f"| {n} | {human(group(n, 0))} | {human(group(n, 1))} | {human(group(n, 2))} |")


if __name__ == "__main__":
    main()
