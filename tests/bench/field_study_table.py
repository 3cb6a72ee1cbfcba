#!/usr/bin/python3
"""The field study's table: one row per field-standard metric, one column per model (generator
seeds, their worst, the baselines) and the Monte Carlo floor, from gantry-validate's JSON reports
<out-dir>/<name>-<sample>.json. Prints it as Markdown per MC sample and writes all of it as JSON."""
import argparse
import json
import math
import os

# metric, how "worse" is ranked: "half" = farther from 0.5, "one" = farther from 1 (in log),
# "low" = larger.
ROWS = [
    ("auc_features", "half"),
    ("auc_cells", "half"),
    ("fpd", "low"),
    ("sep_mean", "low"),
    ("sep_layer_energy", "low"),
    ("sep_layer_width_x", "low"),
    ("sep_sampling_fraction", "low"),
    ("sep_nonzero_cells", "low"),
    ("nonzero_cells_ratio", "one"),
    ("hits_spread_ratio", "one"),
    ("sampling_fraction_spread_ratio", "one"),
    ("shower_max_spread_ratio", "one"),
    ("fom", "low"),
    ("sf_relative_error_max", "low"),
]


def badness(value, kind):
    if value is None:
        return -math.inf
    if kind == "half":
        return abs(value - 0.5)
    if kind == "one":
        return abs(math.log(value)) if value > 0 else math.inf
    return value


def cell(metrics, key):
    value = metrics.get(key)
    if value is None:
        return ""
    spread = metrics.get(key + "_spread")
    return f"{value:.3f} ± {spread:.3f}" if spread is not None else f"{value:.4g}"



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out-dir", required=True)
    p.add_argument("--names", required=True, help="space-separated model names")
    p.add_argument("--samples", required=True, help="space-separated MC reference seeds")
    p.add_argument("--json", required=True)
    p.add_argument("--require", action="store_true",
                   help="exit 1 unless every report has every metric of the table and its floor")
    a = p.parse_args()
    missing = []
    names = a.names.split()
    generators = [n for n in names if n.startswith("gen-")]
    others = [n for n in names if not n.startswith("gen-")]
    result = {}
    for sample in a.samples.split():
        reports = {}
        for n in names:
            with open(os.path.join(a.out_dir, f"{n}-{sample}.json")) as f:
                reports[n] = json.load(f)["metrics"]
        first = reports[names[0]]
        columns = ["MC floor"] + generators + (["worst seed"] if len(generators) > 1 else []) + others
        print(f"\n### MC sample seed {sample} ({int(first.get('field_events', 0))} showers per sample; "
              f"non-zero cells per MC shower {first.get('nonzero_cells_reference', float('nan')):.0f})\n")
        print("| metric | " + " | ".join(columns) + " |")
        print("|---" * (len(columns) + 1) + "|")
        table = {}
        for key, kind in ROWS:
            row = {"MC floor": first.get(key + "_floor")}
            if key + "_floor" in first:
                floor = cell({key: first[key + "_floor"], key + "_spread": first.get(key + "_spread_floor")}, key)
            elif key + "_null" in first:
                floor = f"{first[key + '_null']:.4g} (null)"
            else:
                floor = ""
            cells = [floor]
            for n in names:
                if key not in reports[n]:
                    missing.append(f"{n}-{sample}: {key}")
            for n in generators:
                row[n] = reports[n].get(key)
                cells.append(cell(reports[n], key))
            if len(generators) > 1:
                worst = max(generators, key=lambda n: badness(reports[n].get(key), kind))
                row["worst seed"] = reports[worst].get(key)
                cells.append(f"**{cell(reports[worst], key)}** ({worst})")
            for n in others:
                row[n] = reports[n].get(key)
                cells.append(cell(reports[n], key))
            table[key] = row
            print(f"| `{key}` | " + " | ".join(cells) + " |")
        result[sample] = {"columns": columns, "rows": table,
                          "nonzero_cells": {n: reports[n].get("nonzero_cells_generated") for n in names}}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    if a.require and missing:
        print("missing metrics: " + ", ".join(missing))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
