#!/usr/bin/env python3
"""Shower-to-shower moments of toy Monte Carlo samples on the 25x25x25 grid: what the hard variant
(`hard=1`) adds over the standard toy (docs/MODELS.md "Toy Monte Carlo"). The same moments as
tests/showers/toy_mc_hard_test.cc.

  toymc_moments.py FILE.h5 [FILE.h5 ...]

For each file (3DGAN fixed-angle layout: `ECAL` (N, 25, 25, 25) in GeV, `target` (N, 2) with the
primary energy in column 1) prints one line per moment; "sd" is the standard deviation over showers:
  SF            sampling fraction (cell sum / E): mean and sd
  shower max    depth of the layer holding the most energy (X0): sd
  depth         energy-weighted depth of the layer centres (X0): sd
  centroid      energy-weighted x and y (cells, pooled): sd over the whole shower and over layers 0-7;
                covariance of the layers 0-7 and 14-24 centroids (cells^2)
  width         sd of ln(rms distance from the centroid within 5 cells, x and y pooled)
  lag-1         correlation of consecutive layers' centroid residuals (layer minus shower centroid),
                layers 2-15, x and y pooled
  cells > 0     non-zero cells per shower (mean); share of them below 1e-4 GeV
Needs python3-h5py and python3-numpy (Debian); run with /usr/bin/python3 when a pyenv shim shadows it.
"""
import sys

import numpy as np

X0_MM = 3.504
THIN_LAYERS, THIN_MM, THICK_MM = 17, 2.4, 4.8


def layer_centres_x0():
    widths = np.array([THIN_MM] * THIN_LAYERS + [THICK_MM] * (25 - THIN_LAYERS)) / X0_MM
    return np.cumsum(widths) - widths / 2


def load(path):
    import h5py
    with h5py.File(path, "r") as f:
        return np.asarray(f["ECAL"], dtype=np.float64), np.asarray(f["target"], dtype=np.float64)[:, 1]


def moments(cells, energy):
    idx = np.arange(25) + 0.5
    depth = layer_centres_x0()
    layers = cells.sum(axis=(1, 2))                       # (N, z)
    total = layers.sum(axis=1)
    px, py = cells.sum(axis=2), cells.sum(axis=1)         # (N, x or y, z)

    def centroid(lo, hi):                                 # x then y, (2N,); NaN when empty
        out = []
        for p in (px, py):
            s = p[:, :, lo:hi].sum(axis=2)
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append((s * idx).sum(axis=1) / s.sum(axis=1))
        return np.concatenate(out)

    whole, front, back = centroid(0, 25), centroid(0, 8), centroid(14, 25)
    ok = np.isfinite(front) & np.isfinite(back)
    sf = total / energy
    out = {
        "SF": f"{sf.mean():.4f}, sd {sf.std():.4f}",
        "shower max": f"sd {depth[layers.argmax(axis=1)].std():.2f} X0",
        "depth": f"sd {((layers * depth).sum(axis=1) / total).std():.2f} X0",
        "centroid": (f"sd {whole.std():.3f} (whole), {front[np.isfinite(front)].std():.3f} (layers 0-7) cells;"
                     f" cov(0-7, 14-24) {np.cov(front[ok], back[ok])[0, 1]:.4f} cells^2"),
    }
    n = len(cells)
    w, w2 = np.zeros(n), np.zeros(n)
    for p, c in ((px, whole[:n]), (py, whole[n:])):
        d = idx[None, :] - c[:, None]
        inside = np.abs(d) <= 5
        s = p.sum(axis=2)
        w += (s * inside).sum(axis=1)
        w2 += (s * inside * d * d).sum(axis=1)
    out["width"] = f"sd of ln {np.log(np.sqrt(w2 / w)).std():.3f}"
    a, b = [], []
    for p, c in ((px, whole[:n]), (py, whole[n:])):
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (p * idx[None, :, None]).sum(axis=1) / p.sum(axis=1) - c[:, None]
        a.append(r[:, 2:15].ravel())
        b.append(r[:, 3:16].ravel())
    a, b = np.concatenate(a), np.concatenate(b)
    ok = np.isfinite(a) & np.isfinite(b)
    out["lag-1"] = f"{np.corrcoef(a[ok], b[ok])[0, 1]:.3f}"
    hit = cells > 0
    out["cells > 0"] = (f"{hit.reshape(n, -1).sum(axis=1).mean():.0f} per shower,"
                        f" {(hit & (cells < 1e-4)).sum() / max(hit.sum(), 1):.3f} of them below 1e-4 GeV")
    return out


def main(paths):
    for path in paths:
        cells, energy = load(path)
        print(f"{path}: {len(cells)} showers, E {energy.min():.0f}-{energy.max():.0f} GeV")
        for key, value in moments(cells, energy).items():
            print(f"  {key:11s} {value}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
