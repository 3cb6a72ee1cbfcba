#!/usr/bin/env python3
"""Where a sample of 25x25x25 showers puts its energy across the face: the numbers that show the
period-2 ("comb") structure of the 3DGAN generator next to the toy Monte Carlo
(docs/studies/2026-11-28-fidelity-averages.md).

  shower_stats.py FILE.h5 [FILE.npy ...]

For each file (HDF5 with an `ECAL` (N, x, y, z) dataset, or a .npy array of that shape) prints one line:
  even x / even y  share of the energy in cells of even x (y) index (toy MC: 0.83, its centre x = 12 is even)
  col(12,12)       mean fraction of a shower's energy in the central column (toy MC: 0.70)
  3x3              mean fraction in the central 3 x 3 columns (toy MC: 0.90)
  x[9..15]         the face profile along x, energy fractions of cells 9 to 15
  peak x           histogram over the 25 x cells of each shower's x of maximum deposit
Needs python3-h5py and python3-numpy (Debian); run with /usr/bin/python3 when a pyenv shim shadows it.
"""
import sys

import numpy as np


def load(path):
    if path.endswith(".npy"):
        return np.load(path).astype(np.float64)
    import h5py
    with h5py.File(path, "r") as f:
        return np.asarray(f["ECAL"], dtype=np.float64)


def face_stats(x):
    """The one-line summary above for showers `x` (N, 25, 25, z), or None when all are empty."""
    total = x.sum()
    per_event = x.sum(axis=(1, 2, 3))
    ok = per_event > 0
    if total <= 0 or not ok.any():
        return None
    column = (x[:, 12, 12].sum(axis=1)[ok] / per_event[ok]).mean()
    core = (x[:, 11:14, 11:14].sum(axis=(1, 2, 3))[ok] / per_event[ok]).mean()
    profile = x.sum(axis=(0, 2, 3)) / total
    peaks = np.bincount(np.argmax(x.sum(axis=(2, 3))[ok], axis=1), minlength=25)
    return (f"even x {x[:, 0::2].sum() / total:.3f}  even y {x[:, :, 0::2].sum() / total:.3f}"
            f"  col(12,12) {column:.3f}  3x3 {core:.3f}  x[9..15] {profile[9:16]}  peak x {peaks}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    np.set_printoptions(precision=3, suppress=True, linewidth=250)
    for path in sys.argv[1:]:
        x = load(path)
        if x.ndim != 4 or x.shape[1] != 25 or x.shape[2] != 25:
            sys.exit(f"{path}: expected showers of shape (N, 25, 25, z), got {x.shape}")
        print(f"{path}: {face_stats(x) or 'every shower is empty'}")


if __name__ == "__main__":
    main()
