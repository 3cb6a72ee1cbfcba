#!/usr/bin/python3
"""Readout-threshold probe: how much of a generator's excess occupancy is faint haze? Finds the cell
threshold t at which the generated showers have, on average, as many non-zero cells as a Monte Carlo
sample (the validation sample: the choice is made there), and writes a copy of the generated file
with every cell below t set to 0, to be scored like any other sample.
usage: threshold_probe.py generated.h5 mc.h5 out.h5   (prints t and the occupancies)"""
import sys

import h5py
import numpy as np


def main():
    gen_path, mc_path, out_path = sys.argv[1:4]
    with h5py.File(mc_path, "r") as f:
        mc_nonzero = float((f["ECAL"][:] > 0).reshape(len(f["ECAL"]), -1).sum(1).mean())
    with h5py.File(gen_path, "r") as f:
        cells = f["ECAL"][:]
        rest = {k: f[k][:] for k in f.keys() if k != "ECAL"}
        attrs = dict(f.attrs)
    flat = cells.reshape(len(cells), -1)
    positive = np.sort(flat[flat > 0])
    # Keep the largest mc_nonzero * showers cells: t is the value just below them.
    keep = int(round(mc_nonzero * len(cells)))
    t = 0.0 if keep >= positive.size else float(positive[positive.size - keep - 1])
    cells = np.where(cells > t, cells, 0).astype(np.float32)
    gen_nonzero = float((cells > 0).reshape(len(cells), -1).sum(1).mean())
    lost = 1 - cells.sum() / flat.sum()
    print(f"threshold {t:.3g} GeV: non-zero cells per shower {gen_nonzero:.0f} (MC {mc_nonzero:.0f}, "
          f"before {float((flat > 0).sum(1).mean()):.0f}); energy removed {100 * lost:.2f}%")
    with h5py.File(out_path, "w") as f:
        f.create_dataset("ECAL", data=cells, compression="gzip", compression_opts=1)
        for k, v in rest.items():
            f.create_dataset(k, data=v)
        for k, v in attrs.items():
            f.attrs[k] = v


if __name__ == "__main__":
    main()
