"""The cases of the attack suite (attack_suite.py runs them), grouped by what they attack.

Each case is a function of the Suite that raises CaseFailed (through expect) when the service
answers wrongly; the suite checks after every case that the server and the daemons still run.
"""

import hashlib
import hmac
import http.client
import io
import json
import os
import socket
import ssl
import stat
import struct
import subprocess
import threading
import time

import grpc

from attack_suite import CODE, TERMINAL, CaseFailed, RefusedMidBody, expect

# ---- authentication: a token in every wrong place --------------------------------------------


def auth_cases(s):
    cases = []
    for service, method, request_cls in s.methods():
        def no_token(service=service, method=method, request_cls=request_cls):
            s.expect_code(lambda: s.call(service, method, request_cls(), token=None),
                          CODE.UNAUTHENTICATED, mention="authorization")
        cases.append(("no token on %s.%s" % (service, method), no_token))

    def bad(metadata, code=CODE.UNAUTHENTICATED):
        return lambda: s.expect_code(
            lambda: s.call("TrainingService", "ListJobs", s.training_pb2.ListJobsRequest(),
                           metadata=metadata), code)

    alice = s.alice_token
    cases += [
        ("unknown token", bad([("authorization", "Bearer not-a-token")])),
        ("empty bearer", bad([("authorization", "Bearer ")])),
        ("Basic scheme", bad([("authorization", "Basic " + alice)])),
        ("token without scheme", bad([("authorization", alice)])),
        ("token in x-api-key", bad([("x-api-key", alice)])),
        ("token in a cookie", bad([("cookie", "token=" + alice)])),
        ("token with a suffix", bad([("authorization", "Bearer " + alice + "x")])),
        ("token truncated", bad([("authorization", "Bearer " + alice[:-1])])),
        ("4 KiB token", bad([("authorization", "Bearer " + "A" * 4000)])),
        ("two authorization headers, first bad",
         bad([("authorization", "Bearer nope"), ("authorization", "Bearer " + alice)])),
        ("revoked token", bad([("authorization", "Bearer " + s.revoked_token)])),
        ("join token on a tenant service", bad([("authorization", "Bearer " + s.join_token)])),
        ("admin token of another name in body",
         lambda: s.expect_code(lambda: s.call(
             "AdminService", "CreateTenant", s.admin_pb2.CreateTenantRequest(name="mallory"),
             token=alice), CODE.PERMISSION_DENIED)),
        ("tenant token on AdminService.CreateToken",
         lambda: s.expect_code(lambda: s.call(
             "AdminService", "CreateToken", s.admin_pb2.CreateTokenRequest(tenant="alice"),
             token=s.bob_token), CODE.PERMISSION_DENIED)),
        ("tenant token on AdminService.ListWorkers",
         lambda: s.expect_code(lambda: s.call(
             "AdminService", "ListWorkers", s.admin_pb2.ListWorkersRequest(), token=alice),
             CODE.PERMISSION_DENIED)),
        ("tenant token on WorkerService.Register",
         lambda: s.expect_code(lambda: s.call(
             "WorkerService", "Register", s.worker_pb2.RegisterRequest(name="evil", slots=1),
             token=alice), CODE.UNAUTHENTICATED)),
        ("tenant token on WorkerService.FetchCheckpoint",
         lambda: s.expect_code(lambda: s.call(
             "WorkerService", "FetchCheckpoint",
             s.worker_pb2.FetchCheckpointRequest(sha256="0" * 64), token=alice),
             CODE.UNAUTHENTICATED)),
        ("join token on AdminService",
         lambda: s.expect_code(lambda: s.call(
             "AdminService", "ListTenants", s.admin_pb2.ListTenantsRequest(), token=s.join_token),
             CODE.UNAUTHENTICATED)),
    ]
    return cases


# ---- tenant isolation: another tenant's objects are NOT_FOUND ---------------------------------


def isolation_cases(s):
    t, d, c, g = s.training_pb2, s.datasets_pb2, s.catalog_pb2, s.generation_pb2
    bob = s.bob_token
    job, ds = s.alice_job_id, s.alice_dataset_id

    def nf(service, method, request):
        return lambda: s.expect_code(lambda: s.call(service, method, request, token=bob),
                                     CODE.NOT_FOUND)

    def listing_hides(service, method, request, field):
        def case():
            got = s.call(service, method, request, token=bob)
            ids = [x.id for x in getattr(got, field)]
            expect(job not in ids and ds not in ids, "bob's listing shows alice's objects")
        return case

    def submit_with(edit):
        def case():
            spec = s.spec()
            edit(spec)
            s.expect_code(lambda: s.submit(bob, spec), CODE.NOT_FOUND)
        return case

    model = s.alice_model_ref
    return [
        ("GetJob of another tenant's job", nf("TrainingService", "GetJob", t.GetJobRequest(job_id=job))),
        ("CancelJob of another tenant's job",
         nf("TrainingService", "CancelJob", t.CancelJobRequest(job_id=job))),
        ("WatchJob of another tenant's job",
         nf("TrainingService", "WatchJob", t.WatchJobRequest(job_id=job))),
        ("GetJobLogs of another tenant's job",
         nf("TrainingService", "GetJobLogs", t.GetJobLogsRequest(job_id=job))),
        ("GetValidationPoint of another tenant's job",
         nf("TrainingService", "GetValidationPoint",
            t.GetValidationPointRequest(job_id=job, step=0))),
        ("ListJobs hides other tenants' jobs",
         listing_hides("TrainingService", "ListJobs", t.ListJobsRequest(), "jobs")),
        ("GetDataset of another tenant's dataset",
         nf("DatasetService", "GetDataset", d.GetDatasetRequest(dataset_id=ds))),
        ("GetDataset by another tenant's dataset name",
         nf("DatasetService", "GetDataset", d.GetDatasetRequest(dataset_id="alice-showers"))),
        ("ReadDataset of another tenant's dataset",
         nf("DatasetService", "ReadDataset", d.ReadDatasetRequest(dataset_id=ds))),
        ("DeleteDataset of another tenant's dataset",
         nf("DatasetService", "DeleteDataset", d.DeleteDatasetRequest(dataset_id=ds))),
        ("ListDatasets hides other tenants' datasets",
         listing_hides("DatasetService", "ListDatasets", d.ListDatasetsRequest(), "datasets")),
        ("SubmitJob on another tenant's dataset", submit_with(lambda sp: setattr(sp, "dataset", ds))),
        ("SubmitJob fine-tuning another tenant's private model",
         submit_with(lambda sp: setattr(sp, "initial_model", model))),
        ("GetModel of another tenant's private model",
         nf("CatalogService", "GetModel", c.GetModelRequest(model=model))),
        ("SetAlias on another tenant's model",
         nf("CatalogService", "SetAlias", c.SetAliasRequest(
             name=model.split(":")[0], version=int(model.split(":")[1]), alias="mine"))),
        ("ArchiveModel of another tenant's model",
         nf("CatalogService", "ArchiveModel", c.ArchiveModelRequest(model=model))),
        ("ExportModel of another tenant's private model",
         nf("CatalogService", "ExportModel", c.ExportModelRequest(
             model=model, format=c.EXPORT_FORMAT_ONNX))),
        ("Generate from another tenant's private model",
         nf("GenerationService", "Generate", g.GenerateRequest(
             model=model, range=g.ConditionRange(energy_gev={"min": 10, "max": 100}, count=4)))),
        ("ListModels hides other tenants' private models",
         lambda: expect(all(m.name != model.split(":")[0] for m in s.call(
             "CatalogService", "ListModels", c.ListModelsRequest(), token=bob).models),
             "bob sees alice's private model")),
        ("the dataset still exists for its owner after the attacks",
         lambda: s.call("DatasetService", "GetDataset", d.GetDatasetRequest(dataset_id=ds),
                        token=s.alice_token)),
    ]


# ---- hostile files: uploads that lie ----------------------------------------------------------


def h5(build):
    """An HDF5 file built by `build(f)` with h5py, as bytes."""
    import h5py  # pylint: disable=import-outside-toplevel
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
    return buf.getvalue()


def file_cases(s):
    import numpy as np  # pylint: disable=import-outside-toplevel
    good = s.toy_file(8, 3)

    def refused(name, data, code=CODE.INVALID_ARGUMENT, **kw):
        def case():
            s.expect_code(lambda: s.upload(s.alice_token, name, data, **kw), code, mention=None)
            got = s.call("DatasetService", "ListDatasets", s.datasets_pb2.ListDatasetsRequest(
                page={"page_size": 1000}), token=s.alice_token)
            expect(all(x.name != name for x in got.datasets),
                   "a refused upload left a dataset behind")
        return case

    def huge_chunked(f):
        f.create_dataset("ECAL", shape=(2 ** 36, 25, 25, 25), dtype="f4", chunks=(1, 25, 25, 25))
        f.create_dataset("target", shape=(2 ** 36, 4), dtype="f4", chunks=(1, 4))

    def huge_cells(f):
        f.create_dataset("ECAL", shape=(4, 2 ** 20, 2 ** 20, 25), dtype="f4", chunks=(1, 1, 1, 25))
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def events_mismatch(f):
        f.create_dataset("ECAL", data=np.zeros((4, 25, 25, 25), dtype="f4"))
        f.create_dataset("target", shape=(2 ** 40, 4), dtype="f4", chunks=(1, 4))

    def zero_events(f):
        f.create_dataset("ECAL", shape=(0, 25, 25, 25), dtype="f4", maxshape=(None, 25, 25, 25))
        f.create_dataset("target", shape=(0, 4), dtype="f4", maxshape=(None, 4))

    def wrong_rank(f):
        f.create_dataset("ECAL", data=np.zeros((4, 25), dtype="f4"))
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def wrong_dtype(f):
        f.create_dataset("ECAL", data=np.array([b"x" * 10] * 4))
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def string_cells(f):
        f.create_dataset("ECAL", shape=(4, 25, 25, 25), dtype=h5py_vlen_str())
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def nan_energy(f):
        f.create_dataset("ECAL", data=np.zeros((4, 25, 25, 25), dtype="f4"))
        f.create_dataset("target", data=np.full((4, 4), np.nan, dtype="f4"))

    def group_not_dataset(f):
        f.create_group("ECAL")
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def external_link(f):
        import h5py  # pylint: disable=import-outside-toplevel
        f["ECAL"] = h5py.ExternalLink("/etc/passwd", "/ECAL")
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def soft_link_loop(f):
        import h5py  # pylint: disable=import-outside-toplevel
        f["ECAL"] = h5py.SoftLink("/ECAL")
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    def no_cells(f):
        f.create_dataset("target", data=np.ones((4, 4), dtype="f4"))

    cases = [
        ("HDF5 claiming 2^36 chunked events never written", refused("huge-events", h5(huge_chunked))),
        ("HDF5 claiming 2^40 cells per event", refused("huge-cells", h5(huge_cells))),
        ("HDF5 with 2^40 energies for 4 events", refused("events-mismatch", h5(events_mismatch))),
        ("HDF5 with zero events", refused("zero-events", h5(zero_events))),
        ("HDF5 with cells of the wrong rank", refused("wrong-rank", h5(wrong_rank))),
        ("HDF5 with string cells", refused("wrong-dtype", h5(wrong_dtype))),
        ("HDF5 with NaN energies", refused("nan-energy", h5(nan_energy))),
        ("HDF5 with a group where the cells belong", refused("group", h5(group_not_dataset))),
        ("HDF5 with an external link to /etc/passwd", refused("external-link", h5(external_link))),
        ("HDF5 with a soft link to itself", refused("link-loop", h5(soft_link_loop))),
        ("HDF5 without cells", refused("no-cells", h5(no_cells))),
        ("garbage bytes", refused("garbage", os.urandom(4096))),
        ("an HDF5 signature and garbage",
         refused("signature", b"\x89HDF\r\n\x1a\n" + os.urandom(4096))),
        ("a truncated shower file", refused("truncated", good[:len(good) // 2])),
        ("a shower file with its end overwritten",
         refused("corrupted", good[:-2048] + os.urandom(2048))),
        ("an empty file", refused("empty", b"")),
        ("more bytes than declared", refused("overflow", good, declared=len(good) - 100)),
        ("fewer bytes than declared", refused("underflow", good, declared=len(good) + 100)),
        ("a declared size beyond the limit",
         refused("too-big", good, declared=1 << 40, code=CODE.RESOURCE_EXHAUSTED)),
        ("a negative declared size", refused("negative", good, declared=-5)),
        ("a dataset name with a path", refused("../../etc/passwd", good)),
        ("a file name with a path", refused("path-file-name", good,
                                            file_name="../../../../tmp/x.h5")),
        ("a wrong declared sha256", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "UploadDataset",
            [s.datasets_pb2.UploadDatasetRequest(header=s.datasets_pb2.UploadDatasetHeader(
                name="bad-sha", size_bytes=len(good), sha256="0" * 64)),
             s.datasets_pb2.UploadDatasetRequest(chunk=good)], token=s.alice_token),
            CODE.INVALID_ARGUMENT, mention="sha256")),
        ("chunks without a header", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "UploadDataset",
            [s.datasets_pb2.UploadDatasetRequest(chunk=good)], token=s.alice_token),
            CODE.INVALID_ARGUMENT)),
        ("two headers", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "UploadDataset",
            [s.datasets_pb2.UploadDatasetRequest(header=s.datasets_pb2.UploadDatasetHeader(
                name="two-headers", size_bytes=len(good))),
             s.datasets_pb2.UploadDatasetRequest(header=s.datasets_pb2.UploadDatasetHeader(
                 name="two-headers", size_bytes=len(good)))], token=s.alice_token),
            CODE.INVALID_ARGUMENT)),
        ("the good file still uploads after all that",
         lambda: s.upload(s.alice_token, "good-after-attacks", good)),
    ]
    return cases


def h5py_vlen_str():
    import h5py  # pylint: disable=import-outside-toplevel
    return h5py.string_dtype()


# ---- file:// dataset references ---------------------------------------------------------------


def file_ref_cases(s):
    root = s.data_root
    good = s.toy_file(40, 4)
    with open(os.path.join(root, "Ele_ok.h5"), "wb") as f:
        f.write(good)
    os.symlink("/etc/passwd", os.path.join(root, "Ele_passwd.h5"))
    os.makedirs(os.path.join(s.dir, "elsewhere"))
    with open(os.path.join(s.dir, "elsewhere", "Ele_private.h5"), "wb") as f:
        f.write(good)
    os.symlink(os.path.join(s.dir, "elsewhere"), os.path.join(root, "dir-link"))

    def submit_code(token, ref, code, mention=None):
        return lambda: s.expect_code(lambda: s.submit(token, s.spec(dataset=ref)), code,
                                     mention=mention, no_paths=False)

    def job_fails(ref, code_word):
        def case():
            job = s.submit(s.alice_token, s.spec(dataset=ref))
            job = s.wait_job(s.alice_token, job.id, 180)
            state = s.training_pb2.JobState.Name(job.state)
            expect(state == "JOB_STATE_FAILED", "the job ended %s: %s" % (state, job.message))
            expect(job.reason == "DatasetError", "reason %s: %s" % (job.reason, job.message))
            expect(code_word in job.message, "message %r lacks %r" % (job.message, code_word))
            for secret in ("cache-w1", "cache-w2"):
                expect(secret not in job.message, "the message names the worker cache")
        return case

    cache_entry = os.path.join(s.dir, "cache-w1", "datasets")
    return [
        ("file:///etc/shadow by a tenant not allowed",
         submit_code(s.bob_token, "file:///etc/shadow", CODE.PERMISSION_DENIED)),
        ("file:// under the root by a tenant not allowed",
         submit_code(s.bob_token, "file://" + root + "/Ele_ok.h5", CODE.PERMISSION_DENIED)),
        ("file:///etc/shadow by an allowed tenant",
         submit_code(s.alice_token, "file:///etc/shadow", CODE.INVALID_ARGUMENT, mention=root)),
        ("file:// with .. out of the root",
         submit_code(s.alice_token, "file://" + root + "/../elsewhere/Ele_private.h5",
                     CODE.INVALID_ARGUMENT)),
        ("file:// of the worker's dataset cache",
         submit_code(s.alice_token, "file://" + cache_entry + "/x.h5", CODE.INVALID_ARGUMENT)),
        ("file:// relative path",
         submit_code(s.alice_token, "file://Ele_ok.h5", CODE.INVALID_ARGUMENT)),
        ("file:// of a prefix-sibling directory",
         submit_code(s.alice_token, "file://" + root + "-evil/Ele.h5", CODE.INVALID_ARGUMENT)),
        ("a symlink under the root to /etc/passwd fails on the worker",
         job_fails("file://" + root + "/Ele_passwd.h5", "outside")),
        ("a directory symlink under the root leading out fails on the worker",
         job_fails("file://" + root + "/dir-link/Ele_private.h5", "outside")),
        ("a missing file under the root fails as not found",
         job_fails("file://" + root + "/Ele_missing.h5", "does not exist")),
    ]


# ---- the wire: oversized, nested, malformed and slow --------------------------------------------


def raw_unary(s, method, payload, token, timeout=20):
    fn = s.channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    return fn(payload, metadata=s.md(token), timeout=timeout)


def nested(depth):
    """A protobuf message nested `depth` deep through field 1 (length-delimited)."""
    payload = b""
    for _ in range(depth):
        payload = b"\x0a" + varint(len(payload)) + payload
    return payload


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def wire_cases(s):
    t, g = s.training_pb2, s.generation_pb2
    alice = s.alice_token
    host, port = s.address.rsplit(":", 1)
    port = int(port)

    def big_list(n):
        return g.GenerateRequest(model=s.alice_model_ref, list=g.ConditionList(
            items=[g.Condition(energy_gev=50.0) for _ in range(n)]))

    def many_labels(n):
        spec = s.spec()
        for i in range(n):
            spec.labels["k%d" % i] = "v"
        return spec

    def slowloris():
        socks = []
        for _ in range(64):
            sock = socket.create_connection((host, port), timeout=5)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[:10])  # a preface, never finished
            socks.append(sock)
        try:
            start = time.time()
            s.call("TrainingService", "ListJobs", t.ListJobsRequest(), token=alice, timeout=10)
            expect(time.time() - start < 5, "a call took %.1f s behind 64 idle connections" %
                   (time.time() - start))
        finally:
            for sock in socks:
                sock.close()

    def http1():
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            data = sock.recv(4096)
        except socket.timeout:
            data = b""
        sock.close()
        expect(b"root:" not in data, "the server answered with a file")

    def garbage_tcp():
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(os.urandom(65536))
        sock.close()

    def tls_hello_on_plaintext():
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        sock = socket.create_connection((host, port), timeout=5)
        try:
            ctx.wrap_socket(sock).close()
        except (ssl.SSLError, OSError):
            pass

    def slow_stream():
        # An upload stream that sends its header and then nothing: it must not block others.
        d = s.datasets_pb2
        done = threading.Event()

        def trickle():
            yield d.UploadDatasetRequest(header=d.UploadDatasetHeader(name="slow", size_bytes=10))
            done.wait(20)

        holder = []
        th = threading.Thread(target=lambda: holder.append(s.status_of(lambda: s.stubs[
            "DatasetService"].UploadDataset(trickle(), metadata=s.md(alice), timeout=8))))
        th.start()
        try:
            s.call("TrainingService", "ListJobs", t.ListJobsRequest(), token=alice, timeout=5)
        finally:
            done.set()
            th.join()

    def silent_upload():
        # Opened and never a message: ended by the server's header deadline (2 s in this suite),
        # not by the client's 30 s, with a status that says so.
        start = time.time()
        done = threading.Event()

        def nothing():
            done.wait(30)
            return
            yield

        try:
            s.expect_code(lambda: s.stubs["DatasetService"].UploadDataset(
                nothing(), metadata=s.md(alice), timeout=30), CODE.DEADLINE_EXCEEDED,
                mention="--stream-header-timeout-ms")
        finally:
            done.set()
        expect(time.time() - start < 10, "the silent upload lasted %.1f s" % (time.time() - start))

    def stalled_upload():
        # A header and one chunk of a 1 MiB file, then silence: the idle deadline (3 s) ends it.
        d = s.datasets_pb2
        start = time.time()
        done = threading.Event()

        def half():
            yield d.UploadDatasetRequest(header=d.UploadDatasetHeader(
                name="stalled", size_bytes=1 << 20, file_name="stalled.h5"))
            yield d.UploadDatasetRequest(chunk=b"\0" * 1000)
            done.wait(30)

        try:
            s.expect_code(lambda: s.stubs["DatasetService"].UploadDataset(
                half(), metadata=s.md(alice), timeout=30), CODE.DEADLINE_EXCEEDED,
                mention="after 1000 of 1048576 bytes")
        finally:
            done.set()
        expect(time.time() - start < 10, "the stalled upload lasted %.1f s" % (time.time() - start))

    def silent_flood():
        # 80 silent uploads of one tenant (its 64 stream slots, the rest refused) on a connection
        # of their own; another tenant's calls are answered meanwhile, quickly.
        flooder, _ = s.tenant("flooder")
        flood = grpc.insecure_channel(s.address, options=[("grpc.use_local_subchannel_pool", 1)])
        stub = s.datasets_pb2_grpc.DatasetServiceStub(flood)
        done = threading.Event()

        def nothing():
            done.wait(30)
            return
            yield

        codes = []
        futures = [stub.UploadDataset.future(nothing(), metadata=s.md(flooder), timeout=30)
                   for _ in range(80)]
        try:
            time.sleep(0.5)
            start = time.time()
            s.call("TrainingService", "ListJobs", t.ListJobsRequest(), token=s.bob_token,
                   timeout=5)
            s.upload(s.bob_token, "during-the-flood", s.toy_file(4, 9))
            expect(time.time() - start < 5, "bob waited %.1f s" % (time.time() - start))
        finally:
            for f in futures:
                try:
                    f.result(timeout=30)
                    codes.append(CODE.OK)
                except grpc.RpcError as e:
                    codes.append(e.code())
            done.set()
            flood.close()
        # 64 held until the header deadline, the rest refused (on a slow machine some are opened
        # after the first were cut, and take their freed slots).
        expect(codes.count(CODE.DEADLINE_EXCEEDED) >= 64 and
               codes.count(CODE.RESOURCE_EXHAUSTED) + codes.count(CODE.DEADLINE_EXCEEDED) == 80,
               "the silent uploads ended %s" % sorted(set((c.name, codes.count(c)) for c in codes)))

    def many_streams():
        # 200 WatchJob streams opened and dropped at once; the server keeps answering.
        calls = []
        for _ in range(200):
            calls.append(s.stubs["TrainingService"].WatchJob(
                t.WatchJobRequest(job_id=s.alice_job_id), metadata=s.md(alice), timeout=30))
        for c in calls:
            c.cancel()
        s.call("TrainingService", "ListJobs", t.ListJobsRequest(), token=alice, timeout=10)

    return [
        ("a message over the 16 MiB limit", lambda: s.expect_code(lambda: s.call(
            "TrainingService", "SubmitJob", t.SubmitJobRequest(request_id="x" * (17 << 20)),
            token=alice), CODE.RESOURCE_EXHAUSTED)),
        ("1,000,001 conditions in one Generate", lambda: s.expect_code(lambda: s.call(
            "GenerationService", "Generate", big_list(1000001), token=alice),
            CODE.RESOURCE_EXHAUSTED)),
        ("100,000 job labels", lambda: s.expect_code(lambda: s.submit(alice, many_labels(100000)),
                                                   CODE.INVALID_ARGUMENT)),
        ("a message nested 100,000 deep", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v1.TrainingService/SubmitJob", nested(100000), alice), CODE.INTERNAL)),
        ("a message nested 100 deep", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v1.TrainingService/SubmitJob", nested(100), alice), CODE.INTERNAL)),
        ("malformed protobuf bytes", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v1.TrainingService/GetJob", b"\xff\xff\xff\xff\x0f", alice),
            CODE.INTERNAL)),
        ("a varint length past the end", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v1.TrainingService/GetJob", b"\x0a\xff\xff\xff\x7f", alice),
            CODE.INTERNAL)),
        ("an unknown method", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v1.TrainingService/DropAllTables", b"", alice), CODE.UNIMPLEMENTED)),
        ("an unknown service", lambda: s.expect_code(lambda: raw_unary(
            s, "/gantry.v2.Admin/Root", b"", alice), CODE.UNIMPLEMENTED)),
        ("1 MiB of metadata", lambda: expect(s.status_of(lambda: s.call(
            "TrainingService", "ListJobs", t.ListJobsRequest(),
            metadata=s.md(alice) + [("x-pad", "p" * (1 << 20))]))[0] != CODE.OK,
            "1 MiB of metadata was accepted")),
        ("2,000 metadata entries", lambda: expect(s.status_of(lambda: s.call(
            "TrainingService", "ListJobs", t.ListJobsRequest(),
            metadata=s.md(alice) + [("x-%d" % i, "v") for i in range(2000)]))[0] != CODE.OK,
            "2,000 metadata entries were accepted")),
        ("64 connections that never finish the HTTP/2 preface", slowloris),
        ("an HTTP/1.1 request for a file", http1),
        ("64 KiB of random bytes on the port", garbage_tcp),
        ("a TLS hello on the plaintext port", tls_hello_on_plaintext),
        ("an upload stream that stalls after its header", slow_stream),
        ("an upload stream that never sends its header", silent_upload),
        ("an upload stream that stops after its first chunk", stalled_upload),
        ("80 silent uploads of one tenant while another calls", silent_flood),
        ("200 watch streams opened and dropped", many_streams),
    ]


# ---- request fields: values a validator must refuse --------------------------------------------


def request_cases(s):
    t, g, c, d = s.training_pb2, s.generation_pb2, s.catalog_pb2, s.datasets_pb2
    alice = s.alice_token

    def spec_with(edit, code=CODE.INVALID_ARGUMENT):
        def case():
            spec = s.spec()
            edit(spec)
            s.expect_code(lambda: s.submit(alice, spec), code)
        return case

    def gen(req, code=CODE.INVALID_ARGUMENT):
        return lambda: s.expect_code(lambda: s.call("GenerationService", "Generate", req,
                                                    token=alice), code)

    rng = g.ConditionRange
    model = s.alice_model_ref
    return [
        ("job id with a path", lambda: s.expect_code(lambda: s.call(
            "TrainingService", "GetJob", t.GetJobRequest(job_id="job-../../etc"), token=alice),
            CODE.INVALID_ARGUMENT)),
        ("job id with a NUL", lambda: s.expect_code(lambda: s.call(
            "TrainingService", "GetJob", t.GetJobRequest(job_id="job-\x00x"), token=alice),
            CODE.INVALID_ARGUMENT)),
        ("dataset id with a path", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "ReadDataset", d.ReadDatasetRequest(dataset_id="ds-/../../x"),
            token=alice), CODE.INVALID_ARGUMENT)),
        ("negative read offset", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "ReadDataset", d.ReadDatasetRequest(dataset_id=s.alice_dataset_id,
                                                                  offset=-1), token=alice),
            CODE.INVALID_ARGUMENT)),
        ("read offset past the end", lambda: s.expect_code(lambda: s.call(
            "DatasetService", "ReadDataset", d.ReadDatasetRequest(dataset_id=s.alice_dataset_id,
                                                                  offset=1 << 50), token=alice),
            CODE.OUT_OF_RANGE)),
        ("world_size 1,000,000", spec_with(lambda sp: setattr(sp, "world_size", 1000000))),
        ("epochs 2^31-1", spec_with(lambda sp: setattr(sp.hyper_parameters, "epochs", 2 ** 31 - 1))),
        ("batch 2^31-1", spec_with(
            lambda sp: setattr(sp.hyper_parameters, "batch_per_rank", 2 ** 31 - 1))),
        ("latent size 2^30", spec_with(
            lambda sp: setattr(sp.model_overrides, "latent_size", 1 << 30))),
        ("generator filters 2^30", spec_with(
            lambda sp: setattr(sp.model_overrides, "generator_filters", 1 << 30))),
        ("negative filters", spec_with(
            lambda sp: setattr(sp.model_overrides, "discriminator_filters", -4))),
        ("infinite learning rate", spec_with(
            lambda sp: setattr(sp.hyper_parameters, "learning_rate", float("inf")))),
        ("toymc with 2^40 events", spec_with(
            lambda sp: setattr(sp, "dataset", "toymc:layout=25,events=1099511627776"))),
        ("toymc with a NaN energy", spec_with(
            lambda sp: setattr(sp, "dataset", "toymc:layout=25,events=10,emin=nan"))),
        ("toymc with 10,000 keys", spec_with(
            lambda sp: setattr(sp, "dataset", "toymc:" + ",".join("k%d=1" % i for i in range(10000))))),
        ("a model name with a path", spec_with(lambda sp: setattr(sp, "model_name", "../x"))),
        ("a 1 MiB display name", spec_with(lambda sp: setattr(sp, "display_name", "x" * (1 << 20)))),
        ("Generate a billion showers", gen(g.GenerateRequest(model=model, range=rng(
            energy_gev={"min": 10, "max": 100}, count=10 ** 9)), CODE.RESOURCE_EXHAUSTED)),
        ("Generate with a negative count", gen(g.GenerateRequest(model=model, range=rng(
            energy_gev={"min": 10, "max": 100}, count=-1)))),
        ("Generate with NaN energy", gen(g.GenerateRequest(model=model, list=g.ConditionList(
            items=[g.Condition(energy_gev=float("nan"))])))),
        ("Generate with an inverted range", gen(g.GenerateRequest(model=model, range=rng(
            energy_gev={"min": 100, "max": 10}, count=4)))),
        ("Generate with chunk 2^31-1", gen(g.GenerateRequest(model=model, chunk_showers=2 ** 31 - 1,
                                                              range=rng(energy_gev={"min": 10, "max": 100}, count=4)))),
        ("Generate from a model reference with a path", gen(g.GenerateRequest(
            model="../../x:1", range=rng(energy_gev={"min": 10, "max": 100}, count=4)))),
        ("SetAlias with a 10 KiB alias", lambda: s.expect_code(lambda: s.call(
            "CatalogService", "SetAlias", c.SetAliasRequest(
                name=model.split(":")[0], version=int(model.split(":")[1]), alias="a" * 10240),
            token=alice), CODE.INVALID_ARGUMENT)),
        ("SetTags with 100,000 tags", lambda: s.expect_code(lambda: s.call(
            "CatalogService", "SetTags", c.SetTagsRequest(
                model=model, set={"k%d" % i: "v" for i in range(100000)}), token=alice),
            CODE.INVALID_ARGUMENT)),
        ("ListJobs with a 1 MiB page token", lambda: s.expect_code(lambda: s.call(
            "TrainingService", "ListJobs", t.ListJobsRequest(page={"page_token": "x" * (1 << 20)}),
            token=alice), CODE.INVALID_ARGUMENT)),
        ("GetJobLogs asking for 2^31-1 lines", lambda: s.expect_code(lambda: s.call(
            "TrainingService", "GetJobLogs", t.GetJobLogsRequest(job_id=s.alice_job_id,
                                                                 tail=2 ** 31 - 1),
            token=alice), CODE.INVALID_ARGUMENT)),
    ]


# ---- the worker protocol -----------------------------------------------------------------------


def worker_cases(s):
    w, a = s.worker_pb2, s.admin_pb2
    join = s.join_token

    def reg_request(**fields):
        fields.setdefault("advertise_host", "127.0.0.1")
        return w.RegisterRequest(**fields)
    reg = s.call("WorkerService", "Register", reg_request(name="mallory-w", slots=1),
                 token=join)
    cred = reg.worker_credential
    workers = s.call("AdminService", "ListWorkers", a.ListWorkersRequest(), token=s.admin_token)
    w1_id = [x.id for x in workers.workers if x.name == "w1"][0]
    extra = s.call("AdminService", "CreateJoinToken", a.CreateJoinTokenRequest(description="x"),
                   token=s.admin_token)
    s.call("AdminService", "RevokeJoinToken", a.RevokeJoinTokenRequest(token_id=extra.token_id),
           token=s.admin_token)

    def upload(token, job_id):
        data = b"GANTRY-CHECKPOINT 1\n"
        header = w.CheckpointHeader(job_id=job_id, sha256="0" * 64, size_bytes=len(data))
        return lambda: s.call("WorkerService", "UploadCheckpoint", [
            w.UploadCheckpointRequest(header=header), w.UploadCheckpointRequest(chunk=data)],
            token=token)

    def connect(token, worker_id):
        return lambda: s.call("WorkerService", "Connect", [w.WorkerMessage(
            hello=w.Hello(worker_id=worker_id, incarnation=7))], token=token, timeout=10)

    def code(fn, want, mention=None):
        return lambda: s.expect_code(fn, want, mention=mention)

    forged = "grk_%s:0:%s:%s" % (s.alice_job_id, w1_id, "ab" * 32)
    key_file = os.path.join(s.dir, "blobs", "rank-credentials.key")

    def psql(sql):
        return subprocess.run(["psql", s.db_dsn, "-Atqc", sql], check=True, capture_output=True,
                              text=True).stdout

    def issued(job_id, attempt, worker_id):
        """The rank credential the server issues for this attempt on this worker (the suite reads
        the server's key file, which only the operator can)."""
        with open(key_file) as f:
            key = f.read().strip()
        message = "gantry rank credential\n%s\n%d\n%s" % (job_id, attempt, worker_id)
        mac = hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()
        return "grk_%s:%d:%s:%s" % (job_id, attempt, worker_id, mac)

    def placed(job_id):
        """(attempt, worker id) of rank 0 of the job's current attempt."""
        row = psql("SELECT p.attempt, p.worker_id FROM job_placements p JOIN jobs j ON "
                   "j.id = p.job_id AND j.attempt = p.attempt WHERE p.rank = 0 AND "
                   "p.job_id = '%s'" % job_id).strip()
        expect(row, "job %s has no placement" % job_id)
        attempt, worker = row.split("|")
        return int(attempt), worker

    def fetch(token, sha):
        return lambda: s.call("WorkerService", "FetchCheckpoint",
                              w.FetchCheckpointRequest(sha256=sha), token=token)

    def model_sha():
        return s.call("CatalogService", "GetModel", s.catalog_pb2.GetModelRequest(
            model=s.alice_model_ref), token=s.alice_token).checkpoint_sha256

    def ended_rank(check):
        """A rank credential of alice's finished job, as the server issued it, on `check`."""
        def run():
            cred = issued(s.alice_job_id, *placed_any(s.alice_job_id))
            return check(cred)
        return run

    def placed_any(job_id):
        row = psql("SELECT attempt, worker_id FROM job_placements WHERE rank = 0 AND job_id = "
                   "'%s' ORDER BY attempt DESC LIMIT 1" % job_id).strip()
        expect(row, "job %s has no placement" % job_id)
        attempt, worker = row.split("|")
        return int(attempt), worker

    def live_rank_reads_only_its_own():
        """A running job's rank credential: not alice's registered model (not its starting
        point); once the job is cancelled, nothing at all."""
        t = s.training_pb2
        job = s.submit(s.bob_token, s.spec(epochs=10000))
        deadline = time.time() + 120
        while time.time() < deadline:
            got = s.call("TrainingService", "GetJob", t.GetJobRequest(job_id=job.id),
                         token=s.bob_token)
            if t.JobState.Name(got.state) in ("JOB_STATE_RUNNING",) + TERMINAL:
                break
            time.sleep(0.2)
        try:
            expect(t.JobState.Name(got.state) == "JOB_STATE_RUNNING",
                   "bob's job is %s" % t.JobState.Name(got.state))
            cred = issued(job.id, *placed(job.id))
            s.expect_code(fetch(cred, model_sha()), CODE.PERMISSION_DENIED,
                          mention="its own job's checkpoints")
        finally:
            s.call("TrainingService", "CancelJob", t.CancelJobRequest(job_id=job.id),
                   token=s.bob_token)
            s.wait_job(s.bob_token, job.id, 120)
        s.expect_code(fetch(cred, model_sha()), CODE.UNAUTHENTICATED, mention="expired")

    def name_not_taken():
        """mallory-w (registered above, never connected) keeps its name once its lease is over:
        the join token alone does not take it."""
        again = lambda: s.call("WorkerService", "Register", reg_request(name="mallory-w", slots=1),
                               token=join)
        deadline = time.time() + 10
        while s.status_of(again)[0] == CODE.FAILED_PRECONDITION and time.time() < deadline:
            time.sleep(0.3)
        s.expect_code(again, CODE.PERMISSION_DENIED, mention="credential is valid")

    def key_out_of_the_database():
        mode = stat.S_IMODE(os.stat(key_file).st_mode)
        expect(mode == 0o600, "the key file has mode %o" % mode)
        with open(key_file) as f:
            key = f.read().strip()
        tables = psql("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                      "'public' AND table_type = 'BASE TABLE'").split()
        expect(len(tables) > 10, "only %d tables" % len(tables))
        for table in tables:
            dump = psql('SELECT t::text FROM "%s" t' % table)
            expect(key not in dump and key.upper() not in dump,
                   "table %s holds the rank-credential key" % table)

    return [
        ("Register under a live worker's name", code(lambda: s.call(
            "WorkerService", "Register", reg_request(name="w1", slots=1), token=join),
            CODE.FAILED_PRECONDITION, "in use")),
        ("Register under a live name with a made-up credential", code(lambda: s.call(
            "WorkerService", "Register", reg_request(
                name="w2", slots=1, previous_credential="gwc_" + "0" * 64), token=join),
            CODE.FAILED_PRECONDITION, "in use")),
        ("Register with a revoked join token", code(lambda: s.call(
            "WorkerService", "Register", reg_request(name="late", slots=1),
            token=extra.token), CODE.UNAUTHENTICATED)),
        ("Register with a worker credential", code(lambda: s.call(
            "WorkerService", "Register", reg_request(name="again", slots=1), token=cred),
            CODE.UNAUTHENTICATED)),
        ("the join token on Connect", code(connect(join, w1_id), CODE.UNAUTHENTICATED)),
        ("the join token on UploadCheckpoint", code(upload(join, s.alice_job_id),
                                                    CODE.UNAUTHENTICATED)),
        ("the join token on FetchCheckpoint", code(lambda: s.call(
            "WorkerService", "FetchCheckpoint", w.FetchCheckpointRequest(sha256="0" * 64),
            token=join), CODE.UNAUTHENTICATED)),
        ("the join token on ReadDataset", code(lambda: s.call(
            "DatasetService", "ReadDataset",
            s.datasets_pb2.ReadDatasetRequest(dataset_id=s.alice_dataset_id), token=join),
            CODE.UNAUTHENTICATED)),
        ("a hello naming another worker", code(connect(cred, w1_id), CODE.PERMISSION_DENIED)),
        ("a checkpoint upload for a job never placed here",
         code(upload(cred, s.alice_job_id), CODE.PERMISSION_DENIED)),
        ("a validation report for a job never placed here", code(lambda: s.call(
            "WorkerService", "ReportValidation", w.ReportValidationRequest(
                job_id=s.alice_job_id, point=s.common_pb2.ValidationPoint(
                    step=1, metrics={"fom": 0.5})), token=cred), CODE.PERMISSION_DENIED)),
        ("a forged rank credential", code(upload(forged, s.alice_job_id), CODE.UNAUTHENTICATED)),
        ("Register a registered worker's name with the join token alone", name_not_taken),
        ("an ended attempt's rank credential on FetchCheckpoint", ended_rank(
            lambda cred: s.expect_code(fetch(cred, model_sha()), CODE.UNAUTHENTICATED,
                                       mention="expired"))),
        ("an ended attempt's rank credential on UploadCheckpoint", ended_rank(
            lambda cred: s.expect_code(upload(cred, s.alice_job_id), CODE.UNAUTHENTICATED,
                                       mention="expired"))),
        ("an ended attempt's rank credential on ReportValidation", ended_rank(
            lambda cred: s.expect_code(lambda: s.call(
                "WorkerService", "ReportValidation", w.ReportValidationRequest(
                    job_id=s.alice_job_id, point=s.common_pb2.ValidationPoint(
                        step=1, metrics={"fom": 0.5})), token=cred), CODE.UNAUTHENTICATED))),
        ("an ended attempt's rank credential on ReadDataset", ended_rank(
            lambda cred: s.expect_code(lambda: s.call(
                "DatasetService", "ReadDataset",
                s.datasets_pb2.ReadDatasetRequest(dataset_id=s.alice_dataset_id), token=cred),
                CODE.UNAUTHENTICATED))),
        ("a running rank fetching a registered model it does not start from",
         live_rank_reads_only_its_own),
        ("the rank-credential key: a private file, in no table", key_out_of_the_database),
        ("a rank credential on Connect", code(connect(forged, w1_id), CODE.UNAUTHENTICATED)),
        ("FetchCheckpoint with a path for a sha256", code(lambda: s.call(
            "WorkerService", "FetchCheckpoint",
            w.FetchCheckpointRequest(sha256="../../../../etc/passwd"), token=cred),
            CODE.INVALID_ARGUMENT)),
        ("Register with a 10 KiB name", code(lambda: s.call(
            "WorkerService", "Register", reg_request(name="w" * 10240, slots=1),
            token=join), CODE.INVALID_ARGUMENT)),
        ("Register with a million slots", code(lambda: s.call(
            "WorkerService", "Register", reg_request(name="greedy", slots=1000000),
            token=join), CODE.INVALID_ARGUMENT)),
        ("Register with 100,000 labels", code(lambda: s.call(
            "WorkerService", "Register", reg_request(
                name="labelled", slots=1, labels={"k%d" % i: "v" for i in range(100000)}),
            token=join), CODE.INVALID_ARGUMENT)),
        ("Register with a 1 KiB previous credential", code(lambda: s.call(
            "WorkerService", "Register", reg_request(
                name="long-cred", slots=1, previous_credential="x" * 1024), token=join),
            CODE.INVALID_ARGUMENT)),
        ("UploadCheckpoint without a header", code(lambda: s.call(
            "WorkerService", "UploadCheckpoint", [w.UploadCheckpointRequest(chunk=b"x" * 100)],
            token=cred), CODE.INVALID_ARGUMENT)),
        ("ListJoinTokens by a tenant", code(lambda: s.call(
            "AdminService", "ListJoinTokens", a.ListJoinTokensRequest(), token=s.alice_token),
            CODE.PERMISSION_DENIED)),
        ("RevokeJoinToken of a tenant token id", code(lambda: s.call(
            "AdminService", "RevokeJoinToken", a.RevokeJoinTokenRequest(token_id="tok-1"),
            token=s.admin_token), CODE.INVALID_ARGUMENT)),
        ("ListJoinTokens never shows a secret", lambda: expect(
            join not in str(s.call("AdminService", "ListJoinTokens", a.ListJoinTokensRequest(),
                                   token=s.admin_token)), "a join token secret is listed")),
    ]


# ---- quotas and limits -------------------------------------------------------------------------


class StallingProxy:
    """A TCP proxy to `target` (HOST:PORT) that carries the client's bytes to the server but at most
    `pass_bytes` of the server's back, then stops reading the server's socket, whose receive buffer
    is kept small: to the server, a client whose link stalled (or who stopped reading its socket)."""

    def __init__(self, target, pass_bytes):
        self.target = target.rsplit(":", 1)
        self.pass_bytes = pass_bytes
        self.stalled = 0  # connections past pass_bytes
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.sockets = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)  # before connect
            server.connect((self.target[0], int(self.target[1])))
            self.sockets += [client, server]
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    @staticmethod
    def _up(client, server):
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    return
                server.sendall(data)
        except OSError:
            return

    def _down(self, server, client):
        passed = 0
        try:
            while passed < self.pass_bytes:
                data = server.recv(min(1 << 16, self.pass_bytes - passed))
                if not data:
                    return
                client.sendall(data)
                passed += len(data)
            self.stalled += 1  # and nothing more is read from the server
        except OSError:
            return

    def close(self):
        for sock in self.sockets:
            try:
                sock.close()
            except OSError:
                pass


def quota_cases(s):
    a, t, g, d = s.admin_pb2, s.training_pb2, s.generation_pb2, s.datasets_pb2
    dave, _ = s.tenant("dave")
    s.call("AdminService", "SetTenantLimits", a.SetTenantLimitsRequest(
        tenant="dave", overrides=a.TenantLimitValues(max_concurrent_jobs=1,
                                                     max_dataset_bytes=100 << 10)),
           token=s.admin_token)
    # A job that cannot be placed (world size 3 on two one-slot workers) stays QUEUED: active.
    parked = s.submit(dave, s.spec(world_size=3))

    def set_limits(token, tenant, **values):
        return lambda: s.call("AdminService", "SetTenantLimits", a.SetTenantLimitsRequest(
            tenant=tenant, overrides=a.TenantLimitValues(**values)), token=token)

    def revoked_token_ends_watch():
        token, token_id = s.tenant("erin")
        job = s.submit(token, s.spec(world_size=3))
        stream = s.stubs["TrainingService"].WatchJob(t.WatchJobRequest(job_id=job.id),
                                                    metadata=s.md(token), timeout=30)
        next(stream)
        start = time.time()
        s.call("AdminService", "RevokeToken", a.RevokeTokenRequest(token_id=token_id),
               token=s.admin_token)
        try:
            for _ in stream:
                pass
            raise CaseFailed("the watch ended without an error")
        except grpc.RpcError as e:
            expect(e.code() == CODE.UNAUTHENTICATED, "ended %s: %s" % (e.code(), e.details()))
        expect(time.time() - start < 10, "the watch ran %.1f s after the revocation" %
               (time.time() - start))

    def stalled_readers_give_their_slots_back():
        # Two ReadDataset streams of a tenant with two stream slots, through a link that stops
        # carrying the server's bytes after 256 KiB (a 15 MB dataset: more than the buffers on the
        # way): the server gives up on the link when its pings go unanswered (measured about 10 s,
        # gRPC's keepalive timeout) and the slots come back; meanwhile the tenant's other streams
        # are refused RESOURCE_EXHAUSTED, nobody else's calls.
        token, _ = s.tenant("stalled")
        set_limits(s.admin_token, "stalled", max_streams=2)()
        data = s.toy_file(2500, 4)
        expect(len(data) > (8 << 20), "the dataset (%d bytes) fills no buffers" % len(data))
        ds = s.upload(token, "stall-big", data)
        proxy = StallingProxy(s.address, 256 << 10)
        channel = grpc.insecure_channel(proxy.address)
        stub = s.datasets_pb2_grpc.DatasetServiceStub(channel)
        read = lambda: list(s.stubs["DatasetService"].ReadDataset(
            d.ReadDatasetRequest(dataset_id=ds.id), metadata=s.md(token), timeout=20))
        try:
            stuck = [stub.ReadDataset(d.ReadDatasetRequest(dataset_id=ds.id), metadata=s.md(token),
                                      timeout=300) for _ in range(2)]
            start = time.time()
            time.sleep(1)
            s.expect_code(read, CODE.RESOURCE_EXHAUSTED, mention="max_streams")
            expect(s.call("DatasetService", "ListDatasets", d.ListDatasetsRequest(),
                          token=s.alice_token) is not None, "alice was refused")
            back = None
            while back is None and time.time() - start < 60:
                try:
                    chunks = read()
                    expect(sum(len(c.data) for c in chunks) == len(data), "a short read")
                    back = time.time() - start
                except grpc.RpcError as e:
                    expect(e.code() == CODE.RESOURCE_EXHAUSTED, "refused %s: %s" % (e.code(), e.details()))
                    time.sleep(1)
            expect(proxy.stalled > 0, "the link never stalled: the test tested nothing")
            expect(back is not None, "the stalled streams still held the slots after 60 s")
            del stuck
        finally:
            channel.close()
            proxy.close()

    def study_jobs():
        from gantry.v1 import studies_pb2, studies_pb2_grpc
        spec = studies_pb2.StudySpec(display_name="huge", base_job=s.spec(), folds=20)
        spec.parameters.add(name="hyper_parameters.learning_rate",
                            kind=studies_pb2.SearchParameter.KIND_LOG_CONTINUOUS,
                            min=1e-4, max=1e-2)
        spec.budget.max_trials = 1000
        spec.budget.max_parallel_trials = 1
        stub = studies_pb2_grpc.StudyServiceStub(s.channel)
        s.expect_code(lambda: stub.CreateStudy(studies_pb2.CreateStudyRequest(spec=spec),
                                               metadata=s.md(s.alice_token), timeout=30),
                      CODE.RESOURCE_EXHAUSTED, mention="max_study_jobs")

    def showers_per_minute():
        set_limits(s.admin_token, "alice", max_showers_per_minute=10)()
        try:
            s.expect_code(lambda: s.call("GenerationService", "Generate", g.GenerateRequest(
                model=s.alice_model_ref, range=g.ConditionRange(
                    energy_gev={"min": 20, "max": 200}, count=11)), token=s.alice_token),
                CODE.RESOURCE_EXHAUSTED, mention="max_showers_per_minute")
        finally:
            set_limits(s.admin_token, "alice", max_showers_per_minute=0)()

    return [
        ("a second active job over max_concurrent_jobs", lambda: s.expect_code(
            lambda: s.submit(dave, s.spec()), CODE.RESOURCE_EXHAUSTED,
            mention="max_concurrent_jobs")),
        ("an upload over max_dataset_bytes", lambda: s.expect_code(
            lambda: s.upload(dave, "too-much", os.urandom(200 << 10)),
            CODE.RESOURCE_EXHAUSTED, mention="max_dataset_bytes")),
        ("a declared size over max_dataset_bytes with no bytes sent", lambda: s.expect_code(
            lambda: s.upload(dave, "declared", b"", declared=1 << 30), CODE.RESOURCE_EXHAUSTED)),
        ("Generate over max_showers_per_minute", showers_per_minute),
        ("Generate of a million showers in one call", lambda: s.expect_code(
            lambda: s.call("GenerationService", "Generate", g.GenerateRequest(
                model=s.alice_model_ref, range=g.ConditionRange(
                    energy_gev={"min": 20, "max": 200}, count=10 ** 6)), token=s.alice_token),
            CODE.RESOURCE_EXHAUSTED, mention="max_showers_per_request")),
        ("a study of 1,000 trials x 20 folds", study_jobs),
        ("SetTenantLimits by a tenant", lambda: s.expect_code(
            set_limits(dave, "dave", max_concurrent_jobs=100), CODE.PERMISSION_DENIED)),
        ("GetTenantLimits of another tenant by a tenant", lambda: s.expect_code(
            lambda: s.call("AdminService", "GetTenantLimits",
                           a.GetTenantLimitsRequest(tenant="alice"), token=dave),
            CODE.PERMISSION_DENIED)),
        ("a negative limit", lambda: s.expect_code(
            set_limits(s.admin_token, "dave", max_concurrent_jobs=-1), CODE.INVALID_ARGUMENT)),
        ("a fair-share weight that is not a number", lambda: s.expect_code(
            set_limits(s.admin_token, "dave", fair_share_weight=float("nan")),
            CODE.INVALID_ARGUMENT)),
        ("a negative pool quota", lambda: s.expect_code(
            set_limits(s.admin_token, "dave", max_slots_per_pool={"nowhere": -4}),
            CODE.INVALID_ARGUMENT)),
        ("a quota on a pool that does not exist", lambda: s.expect_code(
            set_limits(s.admin_token, "dave", max_slots_per_pool={"nowhere": 4}),
            CODE.INVALID_ARGUMENT)),
        ("limits of an unknown tenant", lambda: s.expect_code(
            set_limits(s.admin_token, "nobody", max_concurrent_jobs=1), CODE.NOT_FOUND)),
        ("a revoked token ends its WatchJob", revoked_token_ends_watch),
        ("stalled ReadDataset links give their stream slots back", stalled_readers_give_their_slots_back),
        ("the parked job can still be cancelled by its owner", lambda: s.call(
            "TrainingService", "CancelJob", t.CancelJobRequest(job_id=parked.id), token=dave)),
    ]


# ---- the HTTP API ------------------------------------------------------------------------------


def http_cases(s):
    """The browser-facing JSON API (cookie sessions, CSRF, Server-Sent Events, downloads)."""

    def login(token):
        status, headers, body = s.http("POST", "/api/v1/session", json.dumps({"token": token}),
                                       {"Content-Type": "application/json"})
        expect(status == 200, "login answered %d: %s" % (status, body[:200]))
        cookie = headers.get("set-cookie", "").split(";")[0]
        expect(cookie.startswith("gantry_session="), "no session cookie: %r" % cookie)
        return {"Cookie": cookie}, json.loads(body)["csrfToken"]

    alice, alice_csrf = login(s.alice_token)
    bob, bob_csrf = login(s.bob_token)
    alice_name = s.alice_model_ref.split(":")[0]

    def expect_http(method, path, want, body=None, headers=None, status_name=None, mention=None):
        def case():
            wanted = want if isinstance(want, tuple) else (want,)
            try:
                status, _, text = s.http(method, path, body, headers)
            except RefusedMidBody as e:
                # Refused before the body was read: what a 413 means, its answer lost to the reset.
                expect(413 in wanted, "wanted HTTP %s: %s" % (want, e))
                return "refused under the body (the 413 was lost to the reset)"
            expect(status in wanted, "wanted HTTP %s, got %d: %s" % (want, status, text[:300]))
            if status_name is not None:
                expect('"status":"%s"' % status_name in text.replace(" ", ""),
                       "wanted %s in %s" % (status_name, text[:300]))
            if mention is not None:
                expect(mention in text, "the answer %r does not mention %r" % (text[:300], mention))
            for secret in (s.dir, "/blobs/", s.alice_token, s.bob_token, s.admin_token):
                expect(secret not in text, "the answer names a path or a token: %r" % text[:300])
        return case

    def writes(headers, csrf):
        return dict(headers, **{"X-CSRF-Token": csrf, "Content-Type": "application/json"})

    def raw(payload, read_timeout=10):
        """Sends bytes on a new connection; the answer's status line (empty if closed)."""
        host, port = s.http_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=read_timeout) as sock:
            try:
                sock.sendall(payload)
            except OSError:
                return ""
            try:
                data = sock.recv(4096)
            except (socket.timeout, OSError):
                return ""
        return data.split(b"\r\n", 1)[0].decode(errors="replace")

    def raw_refused(payload, allowed=("400", "413", "414", "431")):
        def case():
            line = raw(payload)  # "HTTP/1.1 400 Bad Request", or empty when closed
            code = line.split(" ")[1] if line.startswith("HTTP/") and " " in line else ""
            expect(line == "" or code in allowed, "answered %r" % line)
        return case

    def login_refused(token):
        def case():
            status, headers, text = s.http("POST", "/api/v1/session",
                                           json.dumps({"token": token}),
                                           {"Content-Type": "application/json"})
            expect(status == 401, "answered %d: %s" % (status, text[:200]))
            expect("gantry_session=" not in headers.get("set-cookie", "") or
                   headers.get("set-cookie", "").startswith("gantry_session=;"),
                   "a refused login set a session: %r" % headers.get("set-cookie"))
        return case

    def logged_out_cookie_is_dead():
        headers, csrf = login(s.alice_token)
        status, _, _ = s.http("DELETE", "/api/v1/session", headers=writes(headers, csrf))
        expect(status == 200, "logout answered %d" % status)
        status, _, text = s.http("GET", "/api/v1/models", headers=headers)
        expect(status == 401, "the cookie still works after logout: %d %s" % (status, text[:200]))

    def security_headers():
        status, headers, _ = s.http("GET", "/api/v1/models", headers=alice)
        expect(status == 200, "answered %d" % status)
        for name, want in (("x-content-type-options", "nosniff"), ("x-frame-options", "DENY"),
                           ("cache-control", "no-store")):
            expect(headers.get(name) == want, "%s is %r" % (name, headers.get(name)))
        expect("default-src 'self'" in headers.get("content-security-policy", ""),
               "CSP %r" % headers.get("content-security-policy"))

    def event_streams_per_tenant():
        """Two streams per tenant; a third is 429 while another tenant still gets one."""
        job = s.submit(s.alice_token, s.spec(world_size=3))  # unplaceable: stays QUEUED
        bob_job = s.submit(s.bob_token, s.spec(world_size=3))
        held = []
        try:
            host, port = s.http_address.rsplit(":", 1)

            def open_stream(headers, job_id):
                conn = http.client.HTTPConnection(host, int(port), timeout=20)
                conn.request("GET", "/api/v1/jobs/%s/events" % job_id, headers=headers)
                r = conn.getresponse()
                held.append(conn)
                return r

            for _ in range(2):
                r = open_stream(alice, job.id)
                expect(r.status == 200, "stream answered %d" % r.status)
                expect(b"JOB_STATE_QUEUED" in r.fp.readline() + r.fp.readline() +
                       r.fp.readline(), "the stream sent no event")
            status, _, text = s.http("GET", "/api/v1/jobs/%s/events" % job.id, headers=alice)
            expect(status == 429, "a third stream answered %d: %s" % (status, text[:200]))
            expect("--http-max-event-streams-per-tenant" in text, "message %r" % text[:300])
            r = open_stream(bob, bob_job.id)
            expect(r.status == 200, "bob's stream answered %d while alice holds two" % r.status)
        finally:
            for conn in held:
                conn.close()
            for token, j in ((s.alice_token, job), (s.bob_token, bob_job)):
                s.call("TrainingService", "CancelJob",
                       s.training_pb2.CancelJobRequest(job_id=j.id), token=token)

    def slow_clients_do_not_stop_others():
        """Forty connections that send half a request and wait: other calls still answer."""
        host, port = s.http_address.rsplit(":", 1)
        slow = []
        try:
            for _ in range(40):
                sock = socket.create_connection((host, int(port)), timeout=5)
                sock.sendall(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                slow.append(sock)
            start = time.time()
            for _ in range(3):
                status, _, _ = s.http("GET", "/api/v1/models", headers=bob, timeout=10)
                expect(status == 200, "answered %d beside slow clients" % status)
            expect(time.time() - start < 5, "took %.1f s beside slow clients" %
                   (time.time() - start))
        finally:
            for sock in slow:
                sock.close()

    def header_flood_is_cut_off():
        """Header lines without end: past the 32 KiB buffer the server answers 431 or closes."""
        host, port = s.http_address.rsplit(":", 1)
        line = b"X-Flood: " + b"f" * 8192 + b"\r\n"
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            try:
                sock.sendall(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n" + line * 8)
            except OSError:
                pass
            data = b""
            try:
                while True:
                    got = sock.recv(4096)
                    if not got:
                        break
                    data += got
            except socket.timeout:
                expect(False, "the connection stayed open after 64 KiB of headers")
            except OSError:
                pass  # reset: closed
        expect(data == b"" or data.startswith(b"HTTP/1.1 431") or data.startswith(b"HTTP/1.1 414"),
               "answered %r" % data[:80])
        expect(s.http("GET", "/api/v1/models", headers=bob)[0] == 200, "the API stopped answering")

    def one_address_holds_a_bounded_number_of_connections():
        """64 connections from one address (--http-max-connections-per-ip); the 65th is closed."""
        host, port = s.http_address.rsplit(":", 1)
        held = []
        try:
            for _ in range(64):
                sock = socket.create_connection((host, int(port)), timeout=5)
                sock.sendall(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n")
                held.append(sock)
            extra = socket.create_connection((host, int(port)), timeout=5)
            try:
                extra.sendall(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
                data = extra.recv(4096)
            except OSError:
                data = b""
            finally:
                extra.close()
            expect(data == b"", "the 65th connection was answered: %r" % data[:80])
        finally:
            for sock in held:
                sock.close()
        # The places come back when the connections close. Until the server has seen the closes, a
        # new connection is still over the cap and reset: try again.
        deadline = time.time() + 5
        status = 0
        while time.time() < deadline and status != 200:
            try:
                status = s.http("GET", "/api/v1/models", headers=bob)[0]
            except ConnectionError:
                status = 0
            if status != 200:
                time.sleep(0.1)
        expect(status == 200, "the API answered %d after the connections closed" % status)

    def unread_download_holds_nothing():
        """A download whose client reads nothing: the API still answers others at once."""
        host, port = s.http_address.rsplit(":", 1)
        body = generate_body(s.alice_model_ref, 500).encode()
        head = ("POST /api/v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n" % len(body)).encode()
        for name, value in writes(alice, alice_csrf).items():
            head += ("%s: %s\r\n" % (name, value)).encode()
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(head + b"\r\n" + body)
            first = sock.recv(64)  # the answer has started; the rest is left unread
            expect(first.startswith(b"HTTP/1.1 200"), "the download answered %r" % first)
            start = time.time()
            status, _, _ = s.http("GET", "/api/v1/models", headers=bob, timeout=10)
            expect(status == 200 and time.time() - start < 5,
                   "answered %d after %.1f s beside an unread download" %
                   (status, time.time() - start))

    def generate_body(model, count):
        return json.dumps({"model": model, "range": {"energyGev": {"min": 20, "max": 40},
                                                     "count": str(count)}})

    big = "x" * (2 << 20)
    return [
        # Sessions.
        ("no cookie is 401", expect_http("GET", "/api/v1/models", 401, status_name="UNAUTHENTICATED")),
        ("an API token as the cookie is 401",
         expect_http("GET", "/api/v1/models", 401, headers={"Cookie": "gantry_session=" + s.alice_token})),
        ("a made-up session is 401",
         expect_http("GET", "/api/v1/models", 401, headers={"Cookie": "gantry_session=" + "a" * 64})),
        ("a token in the query string is not a session",
         expect_http("GET", "/api/v1/models?token=" + s.alice_token, 401)),
        ("login with a wrong token", login_refused("not-a-token")),
        ("login with a revoked token", login_refused(s.revoked_token)),
        ("login as a form post (cross-site) is 415",
         expect_http("POST", "/api/v1/session", 415, "token=" + s.alice_token,
                     {"Content-Type": "application/x-www-form-urlencoded"})),
        ("login with extra fields is 400",
         expect_http("POST", "/api/v1/session", 400, json.dumps({"token": "x", "admin": True}),
                     {"Content-Type": "application/json"})),
        ("login with a 2 MiB body is 413",
         expect_http("POST", "/api/v1/session", 413, json.dumps({"token": big}),
                     {"Content-Type": "application/json"})),
        ("a logged-out cookie is dead", logged_out_cookie_is_dead),
        # CSRF and content types on writes.
        ("a write without X-CSRF-Token is 403",
         expect_http("POST", "/api/v1/models/%s/aliases" % alice_name, 403,
                     json.dumps({"alias": "x", "version": 1}),
                     dict(alice, **{"Content-Type": "application/json"}))),
        ("a write with another session's CSRF token is 403",
         expect_http("POST", "/api/v1/models/%s/aliases" % alice_name, 403,
                     json.dumps({"alias": "x", "version": 1}), writes(alice, bob_csrf))),
        ("a write with a text/plain body is 415",
         expect_http("POST", "/api/v1/models/%s/aliases" % alice_name, 415, "alias=x",
                     dict(alice, **{"X-CSRF-Token": alice_csrf, "Content-Type": "text/plain"}))),
        ("logout without the CSRF token is 403",
         expect_http("DELETE", "/api/v1/session", 403, headers=alice)),
        # Other tenants' things.
        ("bob reads alice's private model: 404",
         expect_http("GET", "/api/v1/models/" + s.alice_model_ref, 404, headers=bob)),
        ("bob reads alice's model validation: 404",
         expect_http("GET", "/api/v1/models/%s/validation" % s.alice_model_ref, 404, headers=bob)),
        ("bob sets an alias on alice's model",
         expect_http("POST", "/api/v1/models/%s/aliases" % alice_name, 404,
                     json.dumps({"alias": "mine", "version": 1}), writes(bob, bob_csrf))),
        ("bob deletes alice's alias",
         expect_http("DELETE", "/api/v1/models/%s/aliases/champion" % alice_name, 404,
                     headers=writes(bob, bob_csrf))),
        ("bob tags alice's model",
         expect_http("POST", "/api/v1/models/%s:setTags" % s.alice_model_ref, 404,
                     json.dumps({"set": {"owner": "bob"}}), writes(bob, bob_csrf))),
        ("bob archives alice's model",
         expect_http("POST", "/api/v1/models/%s:archive" % s.alice_model_ref, 404, "{}",
                     writes(bob, bob_csrf))),
        ("bob reads alice's job", expect_http("GET", "/api/v1/jobs/" + s.alice_job_id, 404, headers=bob)),
        ("bob streams alice's job events",
         expect_http("GET", "/api/v1/jobs/%s/events" % s.alice_job_id, 404, headers=bob)),
        ("bob reads alice's job logs",
         expect_http("GET", "/api/v1/jobs/%s/logs" % s.alice_job_id, 404, headers=bob)),
        ("bob reads alice's loss curve",
         expect_http("GET", "/api/v1/jobs/%s/metrics" % s.alice_job_id, 404, headers=bob)),
        ("bob downloads showers of alice's private model",
         expect_http("POST", "/api/v1/generate", 404,
                     generate_body(s.alice_model_ref, 10), writes(bob, bob_csrf))),
        ("bob's job list does not show alice's jobs",
         lambda: expect(s.alice_job_id not in s.http("GET", "/api/v1/jobs", headers=bob)[2],
                        "bob sees alice's job")),
        # Malformed requests.
        ("a download above the web bound is 400 naming the flag",
         expect_http("POST", "/api/v1/generate", 400,
                     generate_body(s.alice_model_ref, 1000000),
                     writes(alice, alice_csrf), mention="--http-max-generate-showers")),
        ("a download with malformed JSON is 400",
         expect_http("POST", "/api/v1/generate", 400, "{\"model\": ", writes(alice, alice_csrf))),
        ("a download with an unknown field is 400",
         expect_http("POST", "/api/v1/generate", 400,
                     json.dumps({"model": s.alice_model_ref, "count": 1, "path": "/etc/passwd"}),
                     writes(alice, alice_csrf))),
        ("a negative afterSequence is 400",
         expect_http("GET", "/api/v1/jobs/%s/events?afterSequence=-1" % s.alice_job_id, 400,
                     headers=alice)),
        ("a non-numeric Last-Event-ID is 400",
         expect_http("GET", "/api/v1/jobs/%s/events" % s.alice_job_id, 400,
                     headers=dict(alice, **{"Last-Event-ID": "1;DROP TABLE jobs"}))),
        ("an unknown list parameter is 400 naming it",
         expect_http("GET", "/api/v1/models?bogus=1", 400, headers=alice, mention="bogus")),
        ("a repeated list parameter is 400",
         expect_http("GET", "/api/v1/models?pageSize=1&pageSize=2", 400, headers=alice)),
        ("a huge page size is clamped or refused",
         lambda: expect(s.http("GET", "/api/v1/models?pageSize=99999999999", headers=alice)[0]
                        in (200, 400), "answered neither 200 nor 400")),
        ("an unknown API route is 404",
         expect_http("GET", "/api/v1/" + "nope/" * 100, 404, headers=alice)),
        ("a model reference with a NUL byte",
         expect_http("GET", "/api/v1/models/a%00b:1", (400, 404), headers=alice)),
        # The static files and the wire.
        ("a path out of the web root",
         lambda: expect("root:" not in s.http("GET", "/../../../../etc/passwd")[2],
                        "served /etc/passwd")),
        ("an encoded path out of the web root",
         lambda: expect("root:" not in s.http("GET", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd")[2],
                        "served /etc/passwd")),
        ("security headers on every answer", security_headers),
        ("a malformed request line", raw_refused(b"GARBAGE\r\n\r\n")),
        ("a 100 KiB request line", raw_refused(b"GET /" + b"a" * (100 << 10) + b" HTTP/1.1\r\n\r\n")),
        # Request line and headers share one 32 KiB buffer per connection.
        ("a 64 KiB header line", raw_refused(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " +
                                             b"b" * (64 << 10) + b"\r\n\r\n")),
        ("a flood of header lines is cut off", header_flood_is_cut_off),
        ("a declared 10 GB body", raw_refused(b"POST /api/v1/session HTTP/1.1\r\nHost: x\r\n"
                                              b"Content-Type: application/json\r\n"
                                              b"Content-Length: 10000000000\r\n\r\n{")),
        ("a chunked body with a huge chunk", raw_refused(
            b"POST /api/v1/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFF\r\nabc")),
        # Capacity.
        ("event streams per tenant", event_streams_per_tenant),
        ("slow clients do not stop others", slow_clients_do_not_stop_others),
        ("one address holds a bounded number of connections",
         one_address_holds_a_bounded_number_of_connections),
        ("an unread download holds nothing", unread_download_holds_nothing),
    ]


# ---- setup and order ---------------------------------------------------------------------------


def setup(s):
    """Tenants, a revoked token, alice's dataset, a queued job and a trained model."""
    s.alice_token, _ = s.tenant("alice")
    s.bob_token, _ = s.tenant("bob")
    revoked, revoked_id = s.tenant("carol")
    s.call("AdminService", "RevokeToken", s.admin_pb2.RevokeTokenRequest(token_id=revoked_id),
           token=s.admin_token)
    s.revoked_token = revoked
    ds = s.upload(s.alice_token, "alice-showers", s.toy_file(20, 1))
    s.alice_dataset_id = ds.id
    # The model: a one-epoch tiny training on toy MC, private to alice.
    job = s.submit(s.alice_token, s.spec(model_name="alice-private"))
    job = s.wait_job(s.alice_token, job.id, 600)
    expect(s.training_pb2.JobState.Name(job.state) == "JOB_STATE_SUCCEEDED",
           "alice's training ended %s: %s" % (s.training_pb2.JobState.Name(job.state), job.message))
    s.alice_model_ref = job.model_ref
    s.alice_job_id = job.id


GROUPS = [
    ("auth", auth_cases),
    ("isolation", isolation_cases),
    ("files", file_cases),
    ("file-refs", file_ref_cases),
    ("wire", wire_cases),
    ("requests", request_cases),
    ("worker", worker_cases),
    ("quota", quota_cases),
    ("http", http_cases),
]


def run_all(s, only):
    setup(s)
    for group, make in GROUPS:
        if only and not any(o and o in group for o in only.split(",")):
            continue
        for name, fn in make(s):
            s.run_case(group, name, fn)
