#!/usr/bin/env python3
"""Writes the seed corpus of hdf5_inspect_fuzzer: small valid shower files of every layout and
edge cases (wrong shapes, NaN and negative cells, float64 and integer data, empty, truncated,
not HDF5). Each is a few KB (one or two events, gzip, sparse cells). Run with Debian's python3
(h5py): make_hdf5_seeds.py tests/fuzz/corpus/hdf5_inspect_fuzzer"""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(1)


def sparse(shape, dtype=np.float32):
    a = np.zeros(shape, dtype=dtype)
    flat = a.reshape(-1)
    idx = rng.choice(flat.size, size=min(40, flat.size), replace=False)
    flat[idx] = rng.uniform(0.0, 0.5, size=idx.size)
    return a


def write(name, build):
    path = os.path.join(out, name)
    with h5py.File(path, "w", libver="earliest") as f:
        build(f)
    return path


def cells(f, name, data, chunk=True):
    kw = dict(compression="gzip", compression_opts=9) if chunk else {}
    if chunk:
        kw["chunks"] = (1,) + data.shape[1:]
    f.create_dataset(name, data=data, **kw)


def fixed(f, n=2, dtype=np.float32):
    cells(f, "ECAL", sparse((n, 25, 25, 25), dtype))
    target = np.zeros((n, 4), dtype=np.float32)
    target[:, 0] = 11
    target[:, 1] = rng.uniform(10, 500, n)
    f.create_dataset("target", data=target)


write("Ele_fixed25.h5", fixed)
write("fixed25_float64.h5", lambda f: fixed(f, 1, np.float64))


def fixed_int(f):
    cells(f, "ECAL", (sparse((1, 25, 25, 25)) * 10).astype(np.int32))
    f.create_dataset("target", data=np.array([[11, 100, 0, 0]], dtype=np.int64))


write("fixed25_int.h5", fixed_int)


def variable(f, theta_name="theta"):
    cells(f, "ECAL", sparse((1, 51, 51, 25)))
    f.create_dataset("energy", data=np.array([120.0], dtype=np.float32))
    f.create_dataset(theta_name, data=np.array([1.4], dtype=np.float32))
    f.attrs["particle"] = "Gamma"


write("variable51.h5", variable)
write("variable51_mtheta.h5", lambda f: variable(f, "mtheta"))


def calo(f):
    cells(f, "showers", sparse((1, 6480)) * 1000)
    f.create_dataset("incident_energies", data=np.array([[65536.0]], dtype=np.float32))


write("calochallenge_ds2.h5", calo)


def bad_cells(f):
    c = sparse((2, 25, 25, 25))
    c[0, 1, 2, 3] = np.nan
    c[1, 3, 2, 1] = -1.0
    cells(f, "ECAL", c)
    f.create_dataset("target", data=np.array([[11, 50, 0, 0], [11, 60, 0, 0]], np.float32))


write("nan_and_negative_cells.h5", bad_cells)


def bad_energy(f):
    cells(f, "ECAL", sparse((1, 25, 25, 25)))
    f.create_dataset("target", data=np.array([[11, -5, 0, 0]], np.float32))


write("negative_energy.h5", bad_energy)


def wrong_shape(f):
    cells(f, "ECAL", sparse((1, 25, 25, 24)))
    f.create_dataset("target", data=np.zeros((1, 4), np.float32))


write("wrong_shape.h5", wrong_shape)


def wrong_rank(f):
    f.create_dataset("showers", data=np.zeros((2, 3, 6480), np.float32), compression="gzip")
    f.create_dataset("incident_energies", data=np.ones((2,), np.float32))


write("wrong_rank.h5", wrong_rank)


def mismatched_events(f):
    cells(f, "ECAL", sparse((2, 25, 25, 25)))
    f.create_dataset("target", data=np.zeros((1, 4), np.float32))


write("mismatched_events.h5", mismatched_events)


def empty(f):
    f.create_dataset("ECAL", shape=(0, 25, 25, 25), dtype=np.float32, maxshape=(None, 25, 25, 25),
                     chunks=(1, 25, 25, 25))
    f.create_dataset("target", shape=(0, 4), dtype=np.float32)


write("empty.h5", empty)


def strings(f):
    f.create_dataset("ECAL", data=np.array([b"not", b"numbers"]))
    f.create_dataset("target", data=np.zeros((1, 4), np.float32))


write("string_cells.h5", strings)
write("no_layout.h5", lambda f: f.create_dataset("x", data=np.arange(4)))

# A truncated copy of a valid file (half of it).
with open(os.path.join(out, "Ele_fixed25.h5"), "rb") as src:
    data = src.read()
with open(os.path.join(out, "truncated.h5"), "wb") as dst:
    dst.write(data[: len(data) // 2])
with open(os.path.join(out, "not_hdf5.h5"), "wb") as dst:
    dst.write(b"this is not an HDF5 file\n")
