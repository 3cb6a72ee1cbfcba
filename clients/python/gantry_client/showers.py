"""Generated showers as one NumPy array (ShowerArray), assembled from the streamed GenerateChunks
under a size bound, and written as a 3DGAN HDF5 file (to_hdf5, with h5py)."""

from __future__ import annotations

import math
import os
from typing import Iterable, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from gantry_client.errors import DataLoss, ResourceExhausted
from gantry_client.v1 import generation_pb2

# The default bound on the showers one generate() call holds in memory.
DEFAULT_MAX_BYTES = 2 << 30

# PDG ids written in the fixed-angle layout's `target` column 0 (as gantry's own writer).
_PDG_IDS = {"Ele": 11, "Gamma": 22, "Pi0": 111, "ChPi": 211}


class ShowerArray(np.ndarray):
    """float32 showers [n, x, y, z] in GeV per cell, with their conditions: `energies` [n] (GeV),
    `angles` [n] (rad; the model's default angle for fixed-angle models), `model_ref` (the resolved
    "name:version") and `particle` ("Ele", "Gamma", "Pi0", "ChPi"). A slice that keeps the first
    axis keeps them; indexing to fewer showers leaves them None (use to_hdf5 with explicit conditions)."""

    energies: Optional[np.ndarray]
    angles: Optional[np.ndarray]
    model_ref: str
    particle: str

    def __new__(cls, cells: ArrayLike, energies: ArrayLike, angles: ArrayLike,
                model_ref: str = "", particle: str = "Ele") -> "ShowerArray":
        array = np.asarray(cells, dtype=np.float32).view(cls)
        array.energies = np.asarray(energies, dtype=np.float64)
        array.angles = np.asarray(angles, dtype=np.float64)
        array.model_ref = model_ref
        array.particle = particle
        return array

    def __array_finalize__(self, obj: Optional[np.ndarray]) -> None:
        if obj is None:
            return
        same_events = obj.ndim >= 1 and self.ndim >= 1 and obj.shape[0] == self.shape[0]
        self.energies = getattr(obj, "energies", None) if same_events else None
        self.angles = getattr(obj, "angles", None) if same_events else None
        self.model_ref = getattr(obj, "model_ref", "")
        self.particle = getattr(obj, "particle", "Ele")

    def to_hdf5(self, path: str, gzip_level: int = 4) -> None:
        """Writes these showers to `path` in the 3DGAN layout of their grid (see to_hdf5)."""
        if self.energies is None:
            raise ValueError("this ShowerArray lost its conditions (indexed to fewer showers); "
                             "call gantry_client.to_hdf5(path, showers, energies, angles)")
        to_hdf5(path, np.asarray(self), self.energies, self.angles, self.particle, gzip_level)


def assemble_chunks(chunks: Iterable[generation_pb2.GenerateChunk], count: int,
                    max_bytes: int = DEFAULT_MAX_BYTES, particle: str = "Ele") -> ShowerArray:
    """Assembles the `count` showers of a Generate stream into one ShowerArray. Raises
    ResourceExhausted before allocating when count x the first chunk's grid exceeds `max_bytes`,
    and DataLoss when the stream is inconsistent (shapes, offsets, sizes, fewer showers)."""
    cells: Optional[np.ndarray] = None
    energies = np.zeros(count, dtype=np.float64)
    angles = np.zeros(count, dtype=np.float64)
    filled = np.zeros(count, dtype=bool)
    model_ref = ""
    grid: Tuple[int, ...] = ()
    for chunk in chunks:
        shape = tuple(int(s) for s in chunk.shape)
        if len(shape) != 4 or min(shape) < 1:
            raise DataLoss(f"chunk at offset {chunk.offset} has shape {list(shape)}, not [n, x, y, z]")
        n = shape[0]
        if cells is None:
            grid = shape[1:]
            need = count * math.prod(grid) * 4
            if need > max_bytes:
                raise ResourceExhausted(
                    f"{count} showers of {grid[0]}x{grid[1]}x{grid[2]} need {need} bytes, over "
                    f"max_bytes={max_bytes}: raise max_bytes or generate in smaller parts")
            cells = np.empty((count,) + grid, dtype=np.float32)
            model_ref = chunk.model_ref
        if shape[1:] != grid:
            raise DataLoss(f"chunk at offset {chunk.offset} has grid {list(shape[1:])}, "
                           f"the stream started with {list(grid)}")
        if chunk.offset < 0 or chunk.offset + n > count:
            raise DataLoss(f"chunk of {n} showers at offset {chunk.offset} is outside the "
                           f"{count} requested")
        if len(chunk.showers) != n * math.prod(grid) * 4 or len(chunk.conditions) != n:
            raise DataLoss(f"chunk at offset {chunk.offset} carries {len(chunk.showers)} bytes and "
                           f"{len(chunk.conditions)} conditions for {n} showers")
        block = np.frombuffer(chunk.showers, dtype="<f4").reshape(shape)
        cells[chunk.offset:chunk.offset + n] = block
        energies[chunk.offset:chunk.offset + n] = [c.energy_gev for c in chunk.conditions]
        angles[chunk.offset:chunk.offset + n] = [c.theta_rad for c in chunk.conditions]
        filled[chunk.offset:chunk.offset + n] = True
    if cells is None or not filled.all():
        got = int(filled.sum())
        raise DataLoss(f"the stream ended after {got} of {count} showers")
    return ShowerArray(cells, energies, angles, model_ref, particle)


def measured_theta_rad(cells: np.ndarray) -> np.ndarray:
    """The incidence angle measured from each shower's layer barycentres ([n, x, y, z] -> [n]),
    as gantry's writer and the 3DGAN reference compute `mtheta`; 100 for an empty shower."""
    cells = np.asarray(cells, dtype=np.float64)
    n, nx, ny, nz = cells.shape
    x_pos = np.arange(nx) + 0.5
    y_pos = np.arange(ny) + 0.5
    z_pos = np.arange(nz) + 0.5
    sum_z = cells.sum(axis=(1, 2))                                  # [n, z]
    x_z = np.einsum("nxyz,x->nz", cells, x_pos)
    y_z = np.einsum("nxyz,y->nz", cells, y_pos)
    total = sum_z.sum(axis=1)
    out = np.full(n, 100.0)
    eps = 1e-7
    for i in range(n):
        if not total[i] > 0:
            continue
        x_ref = x_z[i].sum() / total[i]
        y_ref = y_z[i].sum() / total[i]
        z_ref = (sum_z[i] * z_pos).sum() / total[i]
        weighted = weights = 0.0
        for z in range(nz):
            if not sum_z[i, z] > 0:
                continue
            dz = z_pos[z] - z_ref
            dy = y_z[i, z] / sum_z[i, z] - y_ref
            proj = math.sqrt(max(dy * dy + dz * dz, eps))
            if proj < math.sqrt(eps):
                continue
            m = (x_z[i, z] / sum_z[i, z] - x_ref) / proj
            if dz < 0:
                m = -m
            weighted += z_pos[z] * (math.pi / 2 - math.atan(m))
            weights += z_pos[z]
        if weights > 0:
            out[i] = weighted / weights
    return out


def to_hdf5(path: str, showers: ArrayLike, energies: ArrayLike,
            angles: Optional[ArrayLike] = None, particle: str = "Ele",
            gzip_level: int = 4) -> None:
    """Writes showers [n, x, y, z] (GeV) to `path` in the 3DGAN layout gantry reads and writes:
    25x25x25 -> fixed angle, ECAL float32 (n,25,25,25) and target float32 (n,4) = [PDG id, E, 0, 0];
    51x51x25 -> variable angle, ECAL (n,51,51,25), energy, theta (needs `angles`), mtheta (measured),
    eta and sum. The root attribute "particle" names the particle. Written to `path`.part, then
    renamed, so a failure leaves no partial file. Needs h5py (Debian: python3-h5py)."""
    import h5py  # an optional dependency: only this function needs it

    cells = np.ascontiguousarray(showers, dtype=np.float32)
    if cells.ndim != 4:
        raise ValueError(f"showers must be [n, x, y, z], got shape {cells.shape}")
    n = cells.shape[0]
    grid = tuple(cells.shape[1:])
    e = np.asarray(energies, dtype=np.float32).reshape(-1)
    if e.shape[0] != n:
        raise ValueError(f"{e.shape[0]} energies for {n} showers")
    if particle not in _PDG_IDS:
        raise ValueError(f"particle {particle!r} is not one of {sorted(_PDG_IDS)}")
    if grid not in ((25, 25, 25), (51, 51, 25)):
        raise ValueError(f"grid {grid} is not a 3DGAN layout (25x25x25 or 51x51x25)")
    if grid == (51, 51, 25) and angles is None:
        raise ValueError("the variable-angle layout (51x51x25) needs one angle per shower")
    compression = {"compression": "gzip", "compression_opts": gzip_level} if gzip_level else {}
    part = path + ".part"
    try:
        with h5py.File(part, "w") as f:
            f.create_dataset("ECAL", data=cells, **compression)
            if grid == (25, 25, 25):
                target = np.zeros((n, 4), dtype=np.float32)
                target[:, 0] = _PDG_IDS[particle]
                target[:, 1] = e
                f.create_dataset("target", data=target)
            else:
                theta = np.asarray(angles, dtype=np.float32).reshape(-1)
                if theta.shape[0] != n:
                    raise ValueError(f"{theta.shape[0]} angles for {n} showers")
                f.create_dataset("energy", data=e)
                f.create_dataset("theta", data=theta)
                f.create_dataset("mtheta", data=measured_theta_rad(cells).astype(np.float32))
                f.create_dataset("eta", data=(-np.log(np.tan(0.5 * theta.astype(np.float64))))
                                 .astype(np.float32))
                f.create_dataset("sum", data=cells.sum(axis=(1, 2, 3), dtype=np.float64)
                                 .astype(np.float32))
            f.attrs.create("particle", np.bytes_(particle),
                           dtype=h5py.string_dtype("ascii", len(particle)))
        os.replace(part, path)
    except BaseException:
        if os.path.exists(part):
            os.unlink(part)
        raise
