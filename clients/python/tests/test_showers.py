"""Unit tests of gantry_client.showers: assembling GenerateChunks (order, bound, inconsistent streams)
and the 3DGAN HDF5 layouts written by to_hdf5, read back with h5py."""

import os
import tempfile
import unittest

import numpy as np

import gantry_client
from gantry_client.showers import assemble_chunks, measured_theta_rad
from gantry_client.v1 import generation_pb2


def _chunk(cells, offset, energies, thetas=None, model_ref="m:1"):
    thetas = thetas if thetas is not None else [0.0] * len(energies)
    return generation_pb2.GenerateChunk(
        showers=np.asarray(cells, dtype="<f4").tobytes(), shape=list(cells.shape), offset=offset,
        model_ref=model_ref,
        conditions=[generation_pb2.Condition(energy_gev=e, theta_rad=t)
                    for e, t in zip(energies, thetas)])


class AssembleTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(1)
        self.cells = rng.random((5, 25, 25, 25), dtype=np.float32)
        self.energies = [10.0, 20.0, 30.0, 40.0, 50.0]

    def test_out_of_order_chunks(self):
        chunks = [_chunk(self.cells[3:], 3, self.energies[3:]),
                  _chunk(self.cells[:3], 0, self.energies[:3])]
        showers = assemble_chunks(chunks, 5, particle="Gamma")
        self.assertIsInstance(showers, gantry_client.ShowerArray)
        np.testing.assert_array_equal(np.asarray(showers), self.cells)
        np.testing.assert_array_equal(showers.energies, self.energies)
        self.assertEqual(showers.model_ref, "m:1")
        self.assertEqual(showers.particle, "Gamma")
        self.assertIsNone(showers[1:4].energies)
        self.assertEqual(showers[:, :1].energies.shape, (5,))

    def test_bound_before_allocating(self):
        with self.assertRaisesRegex(gantry_client.ResourceExhausted, "max_bytes=1000"):
            assemble_chunks([_chunk(self.cells[:1], 0, [10.0])], 5, max_bytes=1000)

    def test_inconsistent_streams(self):
        with self.assertRaisesRegex(gantry_client.DataLoss, "after 3 of 5"):
            assemble_chunks([_chunk(self.cells[:3], 0, self.energies[:3])], 5)
        with self.assertRaisesRegex(gantry_client.DataLoss, "outside"):
            assemble_chunks([_chunk(self.cells[:3], 4, self.energies[:3])], 5)
        bad = _chunk(self.cells[:2], 0, self.energies[:2])
        bad.showers = bad.showers[:-4]
        with self.assertRaisesRegex(gantry_client.DataLoss, "bytes"):
            assemble_chunks([bad], 5)
        other_grid = np.zeros((2, 51, 51, 25), np.float32)
        with self.assertRaisesRegex(gantry_client.DataLoss, "grid"):
            assemble_chunks([_chunk(self.cells[:3], 0, self.energies[:3]),
                             _chunk(other_grid, 3, [1.0, 2.0])], 5)


class Hdf5Test(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_fixed_angle(self):
        import h5py
        cells = np.random.default_rng(2).random((4, 25, 25, 25), dtype=np.float32)
        showers = gantry_client.ShowerArray(cells, [50, 60, 70, 80], [0, 0, 0, 0], "m:1", "Ele")
        path = os.path.join(self.dir.name, "out.h5")
        showers.to_hdf5(path)
        self.assertFalse(os.path.exists(path + ".part"))
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["ECAL"][...], cells)
            np.testing.assert_array_equal(f["target"][:, 1], [50, 60, 70, 80])
            np.testing.assert_array_equal(f["target"][:, 0], [11] * 4)
            self.assertEqual(f.attrs["particle"], b"Ele")

    def test_variable_angle(self):
        import h5py
        cells = np.zeros((2, 51, 51, 25), np.float32)
        cells[0, 25, 25, :] = 1.0           # straight down the z axis: 90 degrees
        path = os.path.join(self.dir.name, "var.h5")
        gantry_client.to_hdf5(path, cells, [100, 200], [1.2, 1.5], particle="ChPi")
        with h5py.File(path, "r") as f:
            self.assertEqual(sorted(f.keys()), ["ECAL", "energy", "eta", "mtheta", "sum", "theta"])
            np.testing.assert_allclose(f["mtheta"][...], [np.pi / 2, 100.0], rtol=1e-6)
            np.testing.assert_allclose(f["sum"][...], [25.0, 0.0])
            np.testing.assert_allclose(f["eta"][...], -np.log(np.tan([0.6, 0.75])), rtol=1e-6)

    def test_refusals_leave_no_file(self):
        path = os.path.join(self.dir.name, "bad.h5")
        with self.assertRaisesRegex(ValueError, "2 energies for 3 showers"):
            gantry_client.to_hdf5(path, np.zeros((3, 25, 25, 25), np.float32), [1, 2])
        with self.assertRaisesRegex(ValueError, "not a 3DGAN layout"):
            gantry_client.to_hdf5(path, np.zeros((1, 10, 10, 10), np.float32), [1])
        with self.assertRaisesRegex(ValueError, "angles"):
            gantry_client.to_hdf5(path, np.zeros((2, 51, 51, 25), np.float32), [1, 2], [1.0])
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_measured_theta_tilted(self):
        cells = np.zeros((1, 51, 51, 25), np.float32)
        for z in range(25):                  # x advances one cell per layer: 45 degrees
            cells[0, 10 + z, 25, z] = 1.0
        # As the reference: the layer at the barycentre (z = 12) has no lever arm and counts as
        # 90 degrees, with weight z + 0.5 = 12.5 of the 312.5 in total.
        expected = (np.pi / 4 * (312.5 - 12.5) + np.pi / 2 * 12.5) / 312.5
        self.assertAlmostEqual(float(measured_theta_rad(cells)[0]), expected, places=9)


if __name__ == "__main__":
    unittest.main()
