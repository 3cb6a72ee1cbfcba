#!/usr/bin/python3
"""The attack suite: hostile requests against a real gantry-server and real gantry-worker daemons.

It creates a fresh database on the test PostgreSQL ($GANTRY_TEST_DSN), starts gantry-server on a free
loopback port and two one-slot daemons, creates the tenants "alice" (allowed file:// datasets under a
data directory of the suite) and "bob", gives alice an uploaded dataset, jobs and a trained model,
and then runs every attack case. Each case sends what an attacker would and checks the answer: the
gRPC status code and, where it matters, that the message tells what to change and names no server
path. After every case the server and both daemons must still run and the server must answer a
health check. The output lists every case and its result and ends with the count; the exit status
is 0 only when every case passed and there are at least --min-cases of them.

Python standard library plus Debian's python3-grpcio and python3-h5py; the gantry.v1 stubs come from
the build tree (<build>/clients/python/gen).
"""

import argparse
import http.client
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CODE = grpc.StatusCode
TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


class RefusedMidBody(OSError):
    """The server closed the connection while a request body was being sent, its answer lost."""


class CaseFailed(Exception):
    pass


def expect(condition, what):
    if not condition:
        raise CaseFailed(what)


class Suite:
    """The processes under attack and the helpers cases use."""

    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        sys.path.insert(0, os.path.join(self.build, "clients", "python", "gen"))
        from gantry.v1 import (admin_pb2, admin_pb2_grpc, catalog_pb2, catalog_pb2_grpc,
                               common_pb2, datasets_pb2, datasets_pb2_grpc, generation_pb2,
                               generation_pb2_grpc, training_pb2, training_pb2_grpc, worker_pb2,
                               worker_pb2_grpc)
        self.admin_pb2, self.catalog_pb2, self.common_pb2 = admin_pb2, catalog_pb2, common_pb2
        self.datasets_pb2, self.generation_pb2 = datasets_pb2, generation_pb2
        self.datasets_pb2_grpc = datasets_pb2_grpc
        self.training_pb2, self.worker_pb2 = training_pb2, worker_pb2
        self.modules = {
            "AdminService": (admin_pb2, admin_pb2_grpc),
            "CatalogService": (catalog_pb2, catalog_pb2_grpc),
            "DatasetService": (datasets_pb2, datasets_pb2_grpc),
            "GenerationService": (generation_pb2, generation_pb2_grpc),
            "TrainingService": (training_pb2, training_pb2_grpc),
            "WorkerService": (worker_pb2, worker_pb2_grpc),
        }
        self.dir = tempfile.mkdtemp(prefix="gantry-attacks-")
        self.procs = {}
        self.results = []

    # ---- processes ---------------------------------------------------------------------------

    def start(self):
        dsn = os.environ.get("GANTRY_TEST_DSN", "")
        if not dsn:
            sys.exit("GANTRY_TEST_DSN is not set: run deploy/local/test, which starts PostgreSQL")
        db = "attacks_%d_%d" % (os.getpid(), random.randrange(1 << 30))
        subprocess.run(["psql", dsn, "-qc", "CREATE DATABASE %s" % db], check=True)
        self.db_dsn = dsn.replace("dbname=gantry", "dbname=" + db) if "dbname=" in dsn else \
            dsn + " dbname=" + db
        self.admin_token = "attack-admin-%032x" % random.getrandbits(128)
        self.join_token = "attack-join-%032x" % random.getrandbits(128)
        self.write("admin.token", self.admin_token + "\n")
        self.write("join.token", self.join_token + "\n")
        self.http_address = "127.0.0.1:%d" % (self.args.port_base + 60)
        self.data_root = os.path.join(self.dir, "shared-data")
        os.makedirs(self.data_root)
        self.start_server()
        self.channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)])
        self.stubs = {name: getattr(mods[1], name + "Stub")(self.channel)
                      for name, mods in self.modules.items()}
        for name, port in (("w1", self.args.port_base), ("w2", self.args.port_base + 30)):
            self.start_worker(name, port)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def start_server(self):
        log = open(os.path.join(self.dir, "server.log"), "ab")
        cmd = [os.path.join(self.build, "server", "gantry-server"), "--listen=127.0.0.1:0",
               "--db=" + self.db_dsn, "--data-dir=" + os.path.join(self.dir, "blobs"),
               "--admin-token-file=" + os.path.join(self.dir, "admin.token"),
               "--join-token-file=" + os.path.join(self.dir, "join.token"),
               "--heartbeat-interval-ms=300", "--lease-timeout-ms=3000",
               "--file-dataset-roots=" + self.data_root, "--file-dataset-tenants=alice",
               "--max-dataset-bytes=%d" % (64 << 20),
               "--stream-header-timeout-ms=2000", "--stream-idle-timeout-ms=3000",
               "--http-listen=" + self.http_address]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        line = proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            sys.exit("gantry-server did not start:\n" + self.tail("server.log"))
        self.address = line.split()[-1]
        self.procs["server"] = proc

    def start_worker(self, name, port):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        cmd = [os.path.join(self.build, "workers", "app", "gantry-worker"), "daemon",
               "--server=" + self.address,
               "--join-token-file=" + os.path.join(self.dir, "join.token"),
               "--name=" + name, "--slots=1", "--threads=1",
               "--cache-dir=" + os.path.join(self.dir, "cache-" + name),
               "--file-roots=" + self.data_root, "--advertise-host=127.0.0.1",
               "--rendezvous-ports=%d-%d" % (port, port + 20), "--kill-grace-ms=2000"]
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=log)

    def tail(self, name, lines=30):
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def alive(self):
        """Every process still runs and the server answers; the reason when not."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return "%s exited with %s" % (name, proc.returncode)
        # A case that broke the suite's own connection (the server closes a connection that
        # breaks HTTP/2 limits) leaves one UNAVAILABLE behind: the channel reconnects.
        for attempt in range(3):
            try:
                self.call("AdminService", "ListTenants", self.admin_pb2.ListTenantsRequest(),
                          token=self.admin_token, timeout=15)
                return None
            except grpc.RpcError as e:
                if e.code() != CODE.UNAVAILABLE or attempt == 2:
                    return "the server does not answer: %s %s" % (e.code(), e.details())
                time.sleep(0.5)
        # The HTTP API answers too (an unauthenticated call: 401).
        try:
            status, _, _ = self.http("GET", "/api/v1/session", timeout=15)
        except OSError as e:
            return "the HTTP API does not answer: %s" % e
        if status != 401:
            return "the HTTP API answered GET /api/v1/session without a session with %d" % status
        return None

    def http(self, method, path, body=None, headers=None, timeout=30):
        """One request to the HTTP API: (status, headers as a dict, body as text). A server that
        answers before the body is sent (413 from Content-Length) and closes may break the pipe
        under the rest of the body: the answer is read all the same, and where the reset took it
        too, RefusedMidBody is raised."""
        host, port = self.http_address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=headers or {})
            except (BrokenPipeError, ConnectionResetError) as e:
                if not body:
                    raise
                try:
                    r = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise RefusedMidBody("the connection closed under the body: %s" % e)
                return r.status, {k.lower(): v for k, v in r.getheaders()}, \
                    r.read().decode(errors="replace")
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, \
                r.read().decode(errors="replace")
        finally:
            conn.close()

    # ---- calls -------------------------------------------------------------------------------

    def md(self, token):
        return [("authorization", "Bearer " + token)] if token is not None else []

    def call(self, service, method, request, token=None, timeout=30, metadata=None):
        stub = self.stubs[service]
        fn = getattr(stub, method)
        md = metadata if metadata is not None else self.md(token)
        desc = self.method_descriptor(service, method)
        if desc.client_streaming:
            requests = request if isinstance(request, list) else [request]
            if desc.server_streaming:
                return list(fn(iter(requests), metadata=md, timeout=timeout))
            return fn(iter(requests), metadata=md, timeout=timeout)
        if desc.server_streaming:
            return list(fn(request, metadata=md, timeout=timeout))
        return fn(request, metadata=md, timeout=timeout)

    def method_descriptor(self, service, method):
        module = self.modules[service][0]
        return module.DESCRIPTOR.services_by_name[service].methods_by_name[method]

    def methods(self):
        """(service, method, request class) of every gantry.v1 method."""
        out = []
        for service, (module, _) in sorted(self.modules.items()):
            svc = module.DESCRIPTOR.services_by_name.get(service)
            if svc is None:
                continue
            for m in svc.methods:
                out.append((service, m.name, m.input_type._concrete_class))
        return out

    def status_of(self, fn):
        """The status code and message fn() ends with (OK, "") when it succeeds."""
        try:
            fn()
            return CODE.OK, ""
        except grpc.RpcError as e:
            return e.code(), e.details() or ""

    def expect_code(self, fn, code, mention=None, no_paths=True):
        got, message = self.status_of(fn)
        expect(got == code, "wanted %s, got %s: %s" % (code, got, message))
        if mention is not None:
            expect(mention in message, "the message %r does not mention %r" % (message, mention))
        if no_paths:
            for secret in (self.dir, "/blobs/", "cache-w1", "cache-w2"):
                expect(secret not in message, "the message names a server path: %r" % message)
        return message

    # ---- tenants, data and jobs --------------------------------------------------------------

    def tenant(self, name):
        self.call("AdminService", "CreateTenant", self.admin_pb2.CreateTenantRequest(name=name),
                  token=self.admin_token)
        r = self.call("AdminService", "CreateToken", self.admin_pb2.CreateTokenRequest(tenant=name),
                      token=self.admin_token)
        return r.token, r.token_id

    def upload(self, token, name, data, declared=None, file_name=None, chunk=1 << 20):
        d = self.datasets_pb2
        header = d.UploadDatasetHeader(name=name, size_bytes=len(data) if declared is None
                                       else declared, file_name=file_name or name + ".h5")
        msgs = [d.UploadDatasetRequest(header=header)]
        for i in range(0, len(data), chunk):
            msgs.append(d.UploadDatasetRequest(chunk=data[i:i + chunk]))
        return self.call("DatasetService", "UploadDataset", msgs, token=token, timeout=120)

    def toy_file(self, events, seed):
        path = os.path.join(self.dir, "toy-%d-%d.h5" % (events, seed))
        subprocess.run([os.path.join(self.build, "showers", "gantry-toymc"),
                        "toymc:layout=25,events=%d,seed=%d" % (events, seed), path], check=True, stdout=subprocess.DEVNULL)
        with open(path, "rb") as f:
            return f.read()

    def spec(self, dataset="toymc:layout=25,events=160,seed=5,emin=20,emax=200", epochs=1,
             world_size=1, model_name=""):
        t = self.training_pb2
        s = t.JobSpec(display_name="attack", model_preset="tiny", dataset=dataset,
                      world_size=world_size, model_name=model_name)
        s.hyper_parameters.epochs = epochs
        s.hyper_parameters.batch_per_rank = 8
        s.hyper_parameters.seed = 11
        s.validation.holdout_fraction = 0.2
        return s

    def submit(self, token, spec):
        return self.call("TrainingService", "SubmitJob",
                         self.training_pb2.SubmitJobRequest(spec=spec), token=token)

    def wait_job(self, token, job_id, timeout_s=300):
        t = self.training_pb2
        deadline = time.time() + timeout_s
        job = None
        while time.time() < deadline:
            job = self.call("TrainingService", "GetJob", t.GetJobRequest(job_id=job_id),
                            token=token)
            if t.JobState.Name(job.state) in TERMINAL:
                return job
            time.sleep(0.5)
        raise CaseFailed("job %s did not end within %d s (state %s)" %
                         (job_id, timeout_s, t.JobState.Name(job.state) if job else "?"))

    # ---- running ------------------------------------------------------------------------------

    def run_case(self, group, name, fn):
        start = time.time()
        try:
            detail = fn() or ""
            ok = True
        except CaseFailed as e:
            ok, detail = False, str(e)
        except grpc.RpcError as e:
            ok, detail = False, "unexpected %s: %s" % (e.code(), e.details())
        except Exception:  # pylint: disable=broad-except
            ok, detail = False, traceback.format_exc(limit=3)
        down = self.alive()
        if down is not None:
            ok, detail = False, (detail + "; " if detail else "") + down
        self.results.append((group, name, ok, detail, time.time() - start))
        print("%-4s %-12s %-64s %s" % ("ok" if ok else "FAIL", group, name[:64],
                                        detail if not ok else ""), flush=True)
        if down is not None:
            raise SystemExit("a process under attack died; stopping:\n" +
                             self.tail("server.log") + self.tail("w1.log") + self.tail("w2.log"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--port-base", type=int, default=34600)
    parser.add_argument("--min-cases", type=int, default=100)
    parser.add_argument("--only", default="", help="run only groups whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.modules.setdefault("attack_suite", sys.modules[__name__])
    import attack_cases  # pylint: disable=import-outside-toplevel

    suite = Suite(args)
    try:
        suite.start()
        attack_cases.run_all(suite, args.only)
    finally:
        suite.stop()
    failed = [r for r in suite.results if not r[2]]
    print("\n%d attack cases, %d passed, %d failed (%.0f s)" %
          (len(suite.results), len(suite.results) - len(failed), len(failed),
           sum(r[4] for r in suite.results)))
    print("slowest cases: " + "; ".join("%s / %s %.1f s" % (r[0], r[1][:48], r[4]) for r in
                                         sorted(suite.results, key=lambda r: -r[4])[:5]))
    for group, name, _, detail, _ in failed:
        print("FAILED %s / %s: %s" % (group, name, detail))
    if failed:
        return 1
    if not args.only and len(suite.results) < args.min_cases:
        print("only %d cases; the suite must have at least %d" %
              (len(suite.results), args.min_cases))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
