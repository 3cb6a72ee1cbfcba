"""The gantry-client helpers against a real gantry-server with one worker daemon (started by
python_client_e2e_test.cc, which runs this file from a fresh venv with the wheel installed).
GANTRY_SERVER and GANTRY_TOKEN name the server and a tenant token; GANTRY_E2E_DIR is a scratch
folder. The steps run in order and share the trained model (test_3 trains it)."""

import hashlib
import math
import os
import socket
import sys
import threading
import unittest

import grpc
import h5py
import numpy as np

import gantry_client
from gantry_client.v1 import datasets_pb2, training_pb2

SCRATCH = os.environ["GANTRY_E2E_DIR"]
TINY_SPEC = {
    "display_name": "py-tiny", "model_preset": "tiny", "model_name": "py-tiny",
    "dataset": "toymc:layout=25,events=32,seed=5,emin=20,emax=200", "world_size": 1,
    "hyper_parameters": {"epochs": 1, "batch_per_rank": 8, "seed": 3},
    "validation": {"disabled": True},
}


class DroppingProxy:
    """A TCP proxy to the server on loopback whose open connections can be cut at once."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.open.append((client, upstream))
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop_all(self):
        with self.lock:
            pairs, self.open = self.open, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(pairs)

    def close(self):
        self.listener.close()
        self.drop_all()


class ClientE2eTest(unittest.TestCase):
    client: gantry_client.Client
    model_ref = ""

    @classmethod
    def setUpClass(cls):
        cls.client = gantry_client.connect()  # GANTRY_SERVER / GANTRY_TOKEN, as the CLI

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_1_errors(self):
        with self.assertRaises(gantry_client.NotFound) as caught:
            self.client.job("job-does-not-exist")
        self.assertEqual(caught.exception.code.name, "NOT_FOUND")
        self.assertIn("job-does-not-exist", caught.exception.message)
        # Every call carries a fresh x-request-id; the server returns it and the error reports it.
        first = caught.exception.request_id
        self.assertRegex(first, r"^[0-9a-f]{32}$")
        self.assertIn(first, str(caught.exception))
        with self.assertRaises(gantry_client.NotFound) as again:
            self.client.job("job-does-not-exist")
        self.assertRegex(again.exception.request_id, r"^[0-9a-f]{32}$")
        self.assertNotEqual(again.exception.request_id, first)
        # One the caller sets is kept, not replaced.
        try:
            self.client.training.GetJob(training_pb2.GetJobRequest(job_id="job-does-not-exist"),
                                        metadata=[("x-request-id", "py-e2e-request-1")])
            self.fail("GetJob of a missing job succeeded")
        except grpc.RpcError as e:
            self.assertEqual(gantry_client.errors.from_rpc_error(e).request_id, "py-e2e-request-1")
        bad = dict(TINY_SPEC, world_size=0)
        with self.assertRaises(gantry_client.InvalidArgument) as caught:
            self.client.submit(bad)
        self.assertIn("world_size", caught.exception.message)
        # The server's google.rpc details: a BadRequest naming the field, reason INVALID_FIELD.
        fields = [v.field for v in caught.exception.field_violations]
        self.assertEqual(fields, ["spec.world_size"])
        self.assertEqual(caught.exception.reason, "INVALID_FIELD")
        with self.assertRaises(gantry_client.NotFound):
            self.client.generate("no-such-model:1", energies=[100.0])
        other = gantry_client.connect(token="gnt_not-a-real-token")
        with self.assertRaises(gantry_client.Unauthenticated):
            other.models()
        other.close()

    def test_2_upload(self):
        rng = np.random.default_rng(7)
        cells = np.zeros((40, 25, 25, 25), np.float32)
        cells[:, 10:15, 10:15, 2:20] = rng.random((40, 5, 5, 18), dtype=np.float32)
        energies = np.linspace(20, 200, 40)
        path = os.path.join(SCRATCH, "Ele_upload.h5")
        gantry_client.to_hdf5(path, cells, energies, particle="Ele")
        size = os.path.getsize(path)
        calls = []
        dataset = self.client.upload_dataset(path, "py-upload", labels={"from": "python"},
                                             progress=lambda sent, total: calls.append((sent, total)),
                                             chunk_bytes=16384)
        self.assertTrue(dataset.id.startswith("ds-"))
        self.assertEqual(dataset.name, "py-upload")
        self.assertEqual(dataset.events, 40)
        self.assertEqual(list(dataset.shape), [25, 25, 25])
        self.assertTrue(datasets_pb2.DatasetLayout.Name(dataset.layout).endswith("FIXED_ANGLE"))
        self.assertAlmostEqual(dataset.energy_range_gev.min, 20, places=3)
        self.assertAlmostEqual(dataset.energy_range_gev.max, 200, places=3)
        self.assertEqual(dataset.size_bytes, size)
        with open(path, "rb") as f:
            self.assertEqual(dataset.sha256, hashlib.sha256(f.read()).hexdigest())
        self.assertEqual(dataset.labels["from"], "python")
        # One callback per chunk, increasing, ending at the file size.
        self.assertEqual(len(calls), math.ceil(size / 16384))
        self.assertEqual(calls[-1], (size, size))
        self.assertEqual([s for s, _ in calls], sorted(set(s for s, _ in calls)))
        self.assertEqual(self.client.dataset("py-upload").id, dataset.id)
        with self.assertRaises(gantry_client.AlreadyExists):
            self.client.upload_dataset(path, "py-upload")

        # A callback that raises aborts the upload: its exception comes back, nothing is stored.
        class Stop(Exception):
            pass

        def stop_after_two(sent, total):
            if sent >= 2 * 16384:
                raise Stop()

        with self.assertRaises(Stop):
            self.client.upload_dataset(path, "py-aborted", progress=stop_after_two,
                                       chunk_bytes=16384)
        with self.assertRaises(gantry_client.NotFound):
            self.client.dataset("py-aborted")

    def test_3_submit_watch_resume(self):
        job = self.client.submit(TINY_SPEC)
        self.assertTrue(job.id.startswith("job-"))
        self.assertEqual(training_pb2.JobState.Name(job.state).rsplit("_", 1)[-1], "QUEUED")

        # Watch through a proxy that drops every connection after the first event: watch()
        # reconnects and resumes after the last event it yielded.
        proxy = DroppingProxy(os.environ["GANTRY_SERVER"])
        through_proxy = gantry_client.connect(server=proxy.address)
        seen, dropped = [], 0
        for event in through_proxy.watch(job):
            seen.append(event)
            if len(seen) == 1:
                dropped = proxy.drop_all()
        through_proxy.close()
        proxy.close()
        self.assertGreaterEqual(dropped, 1)
        self.assertGreaterEqual(proxy.accepted, 2, "watch() did not reconnect")
        sequences = [e.sequence for e in seen]
        self.assertEqual(sequences, sorted(set(sequences)), "events repeated or out of order")
        final_states = [training_pb2.JobState.Name(e.state_change.to) for e in seen
                        if e.HasField("state_change")]
        self.assertTrue(final_states[-1].endswith("SUCCEEDED"), final_states)
        registered = [e.model_registered.model_ref for e in seen if e.HasField("model_registered")]
        self.assertEqual(len(registered), 1)

        # Nothing was lost: a full replay of the ended job has exactly the same events.
        replay = list(self.client.watch(job))
        self.assertEqual([e.sequence for e in replay], sequences)

        # The client closes the stream itself, then resumes with after_sequence.
        first = self.client.watch(job)
        head = [next(first), next(first)]
        first.close()
        rest = list(self.client.watch(job, after_sequence=head[-1].sequence))
        self.assertEqual([e.sequence for e in head + rest], sequences)

        done = self.client.wait(job)
        self.assertTrue(training_pb2.JobState.Name(done.state).endswith("SUCCEEDED"))
        self.assertEqual(done.model_ref, registered[0])
        type(self).model_ref = done.model_ref

        # Costs: the ended job's device-hours (no pool, no price) are in the tenant's report, and
        # an estimate of the same spec is based on its history.
        self.assertGreater(done.device_hours, 0)
        report = self.client.cost_report(["tenant"])
        self.assertGreaterEqual(report.device_hours, done.device_hours)
        self.assertEqual(report.cost_usd, 0)
        estimates = self.client.estimate(TINY_SPEC)
        self.assertEqual(len(estimates), 1)
        self.assertTrue(estimates[0].basis.startswith("history: "), estimates[0].basis)

    def test_4_models(self):
        self.assertTrue(self.model_ref, "test_3 registers the model")
        listed = [f"{m.name}:{m.version}" for m in self.client.models()]
        self.assertIn(self.model_ref, listed)
        by_name = self.client.models(name="py-tiny")
        self.assertEqual([f"{m.name}:{m.version}" for m in by_name], [self.model_ref])
        self.assertEqual(self.client.models(name="not-a-model"), [])
        version = self.client.model(self.model_ref)
        self.assertEqual(version.lineage.model_preset, "tiny")
        self.assertAlmostEqual(version.energy_range_gev.min, 20, delta=1)
        refs = lambda models: [f"{m.name}:{m.version}" for m in models]
        self.assertEqual(refs(self.client.models(dataset=TINY_SPEC["dataset"], model_preset="tiny",
                                                 particle="Ele")), [self.model_ref])
        self.assertEqual(self.client.models(model_preset="3dgan-51"), [])

        updated = self.client.update_model(self.model_ref, description="python client",
                                           tags={"stage": "final"})
        self.assertEqual(updated.description, "python client")
        self.assertEqual(dict(updated.tags), {"stage": "final"})
        self.assertEqual(refs(self.client.models(tags={"stage": "final"})), [self.model_ref])
        with self.assertRaises(gantry_client.errors.InvalidArgument) as bad:
            self.client.update_model(self.model_ref, description="x" * 1025)
        self.assertEqual(bad.exception.field_violations[0].field, "model_version.description")

    def test_5_generate(self):
        self.assertTrue(self.model_ref, "test_3 registers the model")
        showers = self.client.generate(self.model_ref, energies=(50, 150), count=70, seed=42,
                                       chunk_showers=32)
        self.assertIsInstance(showers, np.ndarray)
        self.assertEqual(showers.shape, (70, 25, 25, 25))
        self.assertEqual(showers.dtype, np.float32)
        self.assertEqual(showers.model_ref, self.model_ref)
        self.assertTrue(((showers.energies >= 50) & (showers.energies <= 150)).all())
        self.assertGreaterEqual(float(showers.min()), 0.0)
        self.assertGreater(float(showers.sum()), 0.0)
        again = self.client.generate(self.model_ref, energies=(50, 150), count=70, seed=42)
        np.testing.assert_array_equal(np.asarray(again), np.asarray(showers))
        np.testing.assert_array_equal(again.energies, showers.energies)

        fixed = self.client.generate(self.model_ref, energies=100, count=5, seed=3)
        self.assertEqual(fixed.shape, (5, 25, 25, 25))
        np.testing.assert_allclose(fixed.energies, [100] * 5)

        listed = self.client.generate(self.model_ref, energies=[30, 120, 60], seed=5)
        self.assertEqual(listed.shape, (3, 25, 25, 25))
        np.testing.assert_allclose(listed.energies, [30, 120, 60])

        path = os.path.join(SCRATCH, "generated.h5")
        showers.to_hdf5(path)
        with h5py.File(path, "r") as f:
            np.testing.assert_array_equal(f["ECAL"][...], np.asarray(showers))
            np.testing.assert_allclose(f["target"][:, 1], showers.energies, rtol=1e-6)
            self.assertEqual(f["target"][0, 0], 11)  # Ele
            self.assertEqual(f.attrs["particle"], b"Ele")

        # The size bound stops before allocating; the server's refusals are typed.
        with self.assertRaisesRegex(gantry_client.ResourceExhausted, "max_bytes"):
            self.client.generate(self.model_ref, energies=(50, 150), count=70, max_bytes=1 << 20)
        with self.assertRaises(gantry_client.InvalidArgument) as caught:
            self.client.generate(self.model_ref, energies=(10, 500), count=10)
        self.assertIn("training range", caught.exception.message)

    def test_6_study(self):
        # A one-trial study on the daemon: created, followed to its end, its model aliased.
        spec = {
            "display_name": "py-study",
            "base_job": dict(TINY_SPEC, model_name="py-study", validation={"showers_per_bin": 20}),
            "parameters": [{"name": "hyper_parameters.learning_rate",
                            "kind": "KIND_LOG_CONTINUOUS", "min": 1e-4, "max": 1e-2}],
            "budget": {"max_trials": 1, "max_parallel_trials": 1},
            "seed": 5,
        }
        with self.assertRaises(gantry_client.InvalidArgument) as bad:
            self.client.create_study(dict(spec, budget={"max_trials": 0}))
        self.assertIn("spec.budget.max_trials", bad.exception.message)
        with self.assertRaises(gantry_client.InvalidArgument) as unknown:
            self.client.create_study(dict(spec, parameters=[
                {"name": "hyper_parameters.momentum", "kind": "KIND_CONTINUOUS", "min": 0,
                 "max": 1}]))
        self.assertIn("not a searchable JobSpec field", unknown.exception.message)
        study = self.client.create_study(spec)
        self.assertEqual(study.state, self.client.pb.studies.STUDY_STATE_RUNNING)
        self.assertIn(study.id, [s.id for s in self.client.list_studies()])
        updates = []
        final = self.client.wait_study(study, on_update=updates.append, timeout=200)
        self.assertEqual(final.state, self.client.pb.studies.STUDY_STATE_SUCCEEDED, final.message)
        self.assertTrue(updates)
        trials = self.client.trials(study)
        self.assertEqual(len(trials), 1)
        self.assertEqual(trials[0].state, self.client.pb.studies.TRIAL_STATE_SUCCEEDED)
        lr = trials[0].parameters["hyper_parameters.learning_rate"].number
        self.assertTrue(1e-4 <= lr <= 1e-2)
        self.assertAlmostEqual(trials[0].objective, trials[0].folds[0].objective)
        model = self.client.model(f"py-study@{study.id}")
        self.assertEqual(f"{model.name}:{model.version}", final.best_model_ref)
        self.assertEqual(model.lineage.study_id, study.id)
        self.assertAlmostEqual(model.metrics["fom"], trials[0].objective)
        with self.assertRaises(gantry_client.FailedPrecondition):
            self.client.cancel_study(study)


if __name__ == "__main__":
    unittest.main()
