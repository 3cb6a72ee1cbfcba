"""The gantry client: settings resolution (as the CLI), the bearer token, the service stubs, and the
typed helpers over them (generate, upload_dataset, submit, watch, wait, models, ...). Every helper
raises a gantry_client.errors.GantryError subclass when the server refuses a call.

Thread safety: a Client may be shared between threads (gRPC channels and stubs are thread-safe);
each helper call is independent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import numbers
import os
import time
import types
import uuid
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import grpc
from google.protobuf import json_format

from gantry_client.errors import (REQUEST_ID_KEY, DeadlineExceeded, FailedPrecondition,
                                  GantryError, Unavailable, from_rpc_error)
from gantry_client.showers import DEFAULT_MAX_BYTES, ShowerArray, assemble_chunks
from gantry_client.v1 import (admin_pb2, admin_pb2_grpc, catalog_pb2, catalog_pb2_grpc, common_pb2,
                              datasets_pb2, datasets_pb2_grpc, generation_pb2, generation_pb2_grpc,
                              studies_pb2, studies_pb2_grpc, training_pb2, training_pb2_grpc)

DEFAULT_SERVER = "127.0.0.1:50051"


def _spec_message(cls: Any, spec: Any, fields: Mapping[str, Any]) -> Any:
    """A `cls` message (JobSpec, StudySpec) from a message or a dict (protobuf JSON names), with
    `fields` on top."""
    message = cls()
    if isinstance(spec, cls):
        message.CopyFrom(spec)
    elif spec is not None:
        json_format.ParseDict(dict(spec), message)
    if fields:
        json_format.ParseDict(fields, message)
    return message


@dataclasses.dataclass
class Settings:
    """Where to connect and as whom: `server` host:port, `token` (sent as a bearer token; may be
    empty), `ca_cert` (path of a PEM CA bundle; non-empty = TLS), `allow_plaintext` (send the token
    without TLS to a server that is not on this host; refused otherwise, see check_transport)."""

    server: str = DEFAULT_SERVER
    token: str = ""
    ca_cert: str = ""
    allow_plaintext: bool = False


_BOOLS = {"1": True, "true": True, "0": False, "false": False}


def is_loopback_target(server: str) -> bool:
    """Whether gRPC target `server` stays on this host: a unix socket, localhost, 127.0.0.0/8 or
    ::1 (bare or in [brackets], with or without a port or a dns:/// ipv4: ipv6: scheme)."""
    if server.startswith(("unix:", "unix-abstract:")):
        return True
    host = server
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if host.startswith(scheme):
            host = host[len(scheme):]
            break
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            return False
        host = host[1:close]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    host = host[:-1] if host.endswith(".") else host
    if host.lower() in ("localhost", "ip6-localhost") or host == "::1":
        return True
    octets = host.split(".")
    if len(octets) != 4 or octets[0] != "127":
        return False
    return all(o.isdigit() and o.isascii() and len(o) <= 3 and int(o) <= 255 for o in octets)


def check_transport(settings: Settings) -> None:
    """The token goes over TLS, or in clear only to this host: raises FailedPrecondition when a
    plaintext channel would carry a token to another host and settings.allow_plaintext is off."""
    if settings.ca_cert or not settings.token or settings.allow_plaintext:
        return
    if is_loopback_target(settings.server):
        return
    raise FailedPrecondition(
        f"refusing to send the API token in clear to {settings.server}, which is not on this "
        "host: set ca_cert (GANTRY_CA_CERT) to use TLS, or allow_plaintext "
        "(GANTRY_ALLOW_PLAINTEXT=1) on a trusted private network")


def _read_config_file(path: str) -> Dict[str, str]:
    values: Dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ValueError(f"config {path}:{number}: expected 'key = value'")
            key, value = (part.strip() for part in line.split("=", 1))
            if key not in ("server", "token", "ca_cert", "allow_plaintext"):
                raise ValueError(f"config {path}:{number}: unknown key '{key}'")
            values[key] = value.strip("'\"")
    if "token" in values:
        _check_private(path)
    return values


def _check_private(path: str) -> None:
    """A file holding a token must be private, as the CLI and the servers require of their secret
    files: its user's own with mode 0600 or tighter, or root's with at most group read (for a
    process not running as root). Raises FailedPrecondition otherwise."""
    st = os.stat(path)
    me = os.geteuid()
    roots = st.st_uid == 0 and me != 0
    if st.st_uid == me or roots:
        if st.st_mode & (0o037 if roots else 0o077) == 0:
            return
        raise FailedPrecondition(
            f"config file {path} has mode {st.st_mode & 0o7777:04o}: group or others may read "
            "it; make it private (chmod 600) (it holds a token)")
    raise FailedPrecondition(
        f"config file {path} is owned by uid {st.st_uid}, not by this process's user (uid {me}) "
        "or root: chown it, chmod 600 (it holds a token)")


def resolve_settings(server: Optional[str] = None, token: Optional[str] = None,
                     ca_cert: Optional[str] = None, config: Optional[str] = None,
                     allow_plaintext: Optional[bool] = None) -> Settings:
    """Arguments > GANTRY_SERVER/GANTRY_TOKEN/GANTRY_CA_CERT/GANTRY_ALLOW_PLAINTEXT > config file,
    as the CLI does."""
    path = config or os.environ.get("GANTRY_CONFIG")
    explicit = bool(path)
    if not path:
        path = os.path.join(os.path.expanduser("~"), ".config", "gantry", "config")
    file_values: Dict[str, str] = {}
    if os.path.exists(path):
        file_values = _read_config_file(path)
    elif explicit:
        raise FileNotFoundError(f"config file {path} does not exist")

    def pick(arg: Optional[str], env_name: str, key: str, default: str = "") -> str:
        if arg is not None:
            return arg
        if os.environ.get(env_name):
            return os.environ[env_name]
        return file_values.get(key, default)

    plaintext = pick(None if allow_plaintext is None else str(allow_plaintext).lower(),
                     "GANTRY_ALLOW_PLAINTEXT", "allow_plaintext", "false")
    if plaintext.lower() not in _BOOLS:
        raise ValueError(f"allow_plaintext (GANTRY_ALLOW_PLAINTEXT) must be 1, true, 0 or false, "
                         f"not {plaintext!r}")
    return Settings(server=pick(server, "GANTRY_SERVER", "server", DEFAULT_SERVER),
                    token=pick(token, "GANTRY_TOKEN", "token"),
                    ca_cert=pick(ca_cert, "GANTRY_CA_CERT", "ca_cert"),
                    allow_plaintext=_BOOLS[plaintext.lower()])


class _CallMetadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                    grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` (when a token is set; plaintext channels too) and a fresh
    `x-request-id` to every call that does not carry one, so a failure can be found in the server's
    log by the id the error reports."""

    def __init__(self, token: str):
        self._token = ("authorization", f"Bearer {token}") if token else None

    def _details(self, details):
        metadata = list(details.metadata or [])
        if self._token is not None:
            metadata.append(self._token)
        if not any(key == REQUEST_ID_KEY for key, _ in metadata):
            metadata.append((REQUEST_ID_KEY, uuid.uuid4().hex))
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None),
                            getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


# Conditions: a number, or a (min, max) pair drawn uniformly (with `count`).
Energies = Union[float, Sequence[float], Tuple[float, float], None]

_PRECISIONS = {"fp32": generation_pb2.PRECISION_FP32, "bf16": generation_pb2.PRECISION_BF16}
_PARTICLES = {"Ele": common_pb2.PARTICLE_ELECTRON, "Gamma": common_pb2.PARTICLE_PHOTON,
              "Pi0": common_pb2.PARTICLE_PI0, "ChPi": common_pb2.PARTICLE_CHARGED_PION}
_PARTICLE_NAMES = {v: k for k, v in _PARTICLES.items()}
_VISIBILITIES = {"private": common_pb2.VISIBILITY_PRIVATE, "public": common_pb2.VISIBILITY_PUBLIC}
# By name suffix, so the set holds whatever prefix the JobState values carry.
_TERMINAL_STATES = frozenset(v.number for v in training_pb2.JobState.DESCRIPTOR.values
                             if v.name.endswith(("SUCCEEDED", "FAILED", "CANCELLED")))
_TERMINAL_STUDY_STATES = frozenset(
    v.number for v in studies_pb2.StudyState.DESCRIPTOR.values
    if v.name.endswith(("SUCCEEDED", "FAILED", "CANCELLED")))
# Upload chunks: the server takes at most 4 MiB per message.
_UPLOAD_CHUNK_MAX = 4 << 20


class Client:
    """The stubs of every public gantry.v1 service on one channel, and typed helpers over them.
    `pb` holds the message modules (pb.training.JobSpec, ...)."""

    pb = types.SimpleNamespace(common=common_pb2, training=training_pb2, datasets=datasets_pb2,
                               catalog=catalog_pb2, generation=generation_pb2, admin=admin_pb2,
                               studies=studies_pb2)

    def __init__(self, settings: Settings, timeout: float = 30.0) -> None:
        """Opens a channel to settings.server (TLS when settings.ca_cert is set; check_transport
        first). `timeout` is the deadline in seconds of each unary helper call."""
        check_transport(settings)
        self.settings = settings
        self.timeout = timeout
        if settings.ca_cert:
            with open(settings.ca_cert, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            channel = grpc.secure_channel(settings.server, credentials)
        else:
            channel = grpc.insecure_channel(settings.server)
        channel = grpc.intercept_channel(channel, _CallMetadata(settings.token))
        self.channel = channel
        self.training = training_pb2_grpc.TrainingServiceStub(channel)
        self.datasets = datasets_pb2_grpc.DatasetServiceStub(channel)
        self.catalog = catalog_pb2_grpc.CatalogServiceStub(channel)
        self.generation = generation_pb2_grpc.GenerationServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.studies = studies_pb2_grpc.StudyServiceStub(channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: Callable[..., Any], request: Any, timeout: Optional[float] = None) -> Any:
        try:
            return method(request, timeout=timeout or self.timeout)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    # --- models ---------------------------------------------------------------------------------

    def models(self, name: str = "", tags: Optional[Mapping[str, str]] = None, *,
               order_by: str = "", include_archived: bool = False,
               metric_max: Optional[Mapping[str, float]] = None,
               dataset: str = "", model_preset: str = "", particle: str = "",
               limit: int = 10000) -> List[catalog_pb2.ModelVersion]:
        """The model versions the caller can see (own and public), newest first unless `order_by`
        ("created_at" or "metric:<name>", ascending). `name` exact; `tags` must all match;
        `metric_max` keeps versions whose metric is <= the value; `dataset` (a "ds-" id, the name
        of one of your datasets, or a "toymc:"/"file://" reference as the job gave it),
        `model_preset` ("3dgan-25", ...) and `particle` ("Ele", "Gamma", "Pi0", "ChPi") keep the
        versions trained on them. Follows pages up to `limit`.

            for m in client.models(dataset="ele-2024", particle="Ele", metric_max={"fom": 0.2}):
                print(f"{m.name}:{m.version}", m.metrics["fom"])
        """
        if particle and particle not in _PARTICLES:
            raise ValueError(f"particle {particle!r}: use one of {sorted(_PARTICLES)}")
        request = catalog_pb2.ListModelsRequest(
            name=name, tags=dict(tags or {}), order_by=order_by, include_archived=include_archived,
            metric_filters=[catalog_pb2.MetricFilter(metric=k, max=v)
                            for k, v in (metric_max or {}).items()],
            dataset=dataset, model_preset=model_preset,
            particle=_PARTICLES[particle] if particle else common_pb2.PARTICLE_UNSPECIFIED)
        found: List[catalog_pb2.ModelVersion] = []
        while len(found) < limit:
            request.page.page_size = min(100, limit - len(found))
            response = self._call(self.catalog.ListModels, request)
            found.extend(response.models)
            if not response.next_page_token:
                break
            request.page.page_token = response.next_page_token
        return found[:limit]

    def update_model(self, ref: str, *, description: Optional[str] = None,
                     visibility: Optional[str] = None,
                     tags: Optional[Mapping[str, str]] = None) -> catalog_pb2.ModelVersion:
        """Changes the description, visibility ("private" or "public") or tags (the whole map is
        replaced; {} removes every tag) of the version `ref` (owner only) and returns it. Only
        the arguments given are sent in the update mask; at least one is required. An archived
        version keeps its visibility and tags (FailedPrecondition); its description may change.

            client.update_model("ele-25:3", description="final", visibility="public")
        """
        patch = catalog_pb2.ModelVersion()
        paths: List[str] = []
        if description is not None:
            patch.description = description
            paths.append("description")
        if visibility is not None:
            if visibility not in _VISIBILITIES:
                raise ValueError(f"visibility {visibility!r}: use one of {sorted(_VISIBILITIES)}")
            patch.visibility = _VISIBILITIES[visibility]
            paths.append("visibility")
        if tags is not None:
            patch.tags.update(dict(tags))
            paths.append("tags")
        if not paths:
            raise ValueError("update_model needs at least one of description, visibility, tags")
        request = catalog_pb2.UpdateModelRequest(model=ref, model_version=patch)
        request.update_mask.paths.extend(paths)
        return self._call(self.catalog.UpdateModel, request)

    def model(self, ref: str) -> catalog_pb2.ModelVersion:
        """One model version ("name:version" or "name@alias") with its histograms and curve."""
        return self._call(self.catalog.GetModel, catalog_pb2.GetModelRequest(model=ref))

    # --- generation -----------------------------------------------------------------------------

    def generate(self, model: str, energies: Energies = None, angles: Energies = None,
                 count: Optional[int] = None, seed: int = 0, *, particle: str = "",
                 precision: str = "fp32", chunk_showers: int = 0,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 timeout: Optional[float] = None) -> ShowerArray:
        """Generates showers from `model` ("name:version" or "name@alias") into one float32 array
        [n, x, y, z] (GeV per cell) with its conditions (ShowerArray: .energies, .angles, .to_hdf5).

        With `count`: `count` showers, `energies` a (min, max) pair drawn uniformly (None = the
        model's training range) or one energy for all; `angles` likewise (rad; None = the model's
        default angle, or its training range for variable-angle models). Without `count`: one shower per energy of `energies` (a number or a sequence),
        `angles` None, one angle for all, or one per energy. The same seed (non-zero), model and
        conditions give the same showers. Raises ResourceExhausted before allocating when the
        showers would exceed `max_bytes` (2 GiB by default), InvalidArgument/NotFound/... when the
        server refuses, ValueError for arguments that cannot form a request. `timeout` defaults
        to 30 minutes plus 50 ms per shower, as the CLI.

            showers = client.generate("ele-25:3", energies=(50, 150), count=1000, seed=42)
            showers.to_hdf5("ele.h5")
        """
        request = generation_pb2.GenerateRequest(model=model, seed=seed,
                                                 chunk_showers=chunk_showers)
        if precision not in _PRECISIONS:
            raise ValueError(f"precision {precision!r}: use one of {sorted(_PRECISIONS)}")
        request.precision = _PRECISIONS[precision]
        if particle:
            if particle not in _PARTICLES:
                raise ValueError(f"particle {particle!r}: use one of {sorted(_PARTICLES)}")
            request.particle = _PARTICLES[particle]
        version = self.model(model)
        if count is not None:
            total = int(count)
            if total < 1:
                raise ValueError(f"count must be at least 1, got {count}")
            if energies is None:
                lo, hi = version.energy_range_gev.min, version.energy_range_gev.max
            else:
                lo, hi = _number_or_pair(energies, "energies")
            request.range.count = total
            request.range.energy_gev.min, request.range.energy_gev.max = lo, hi
            if angles is not None:
                tlo, thi = _number_or_pair(angles, "angles")
                request.range.theta_rad.min, request.range.theta_rad.max = tlo, thi
        else:
            if energies is None:
                raise ValueError("give energies (a number or a sequence), or count with a range")
            values = ([float(energies)] if _is_number(energies)  # type: ignore[arg-type]
                      else [float(e) for e in energies])  # type: ignore[union-attr]
            if not values:
                raise ValueError("energies is empty")
            total = len(values)
            thetas = _per_shower(angles, total, "angles")
            request.list.items.extend(generation_pb2.Condition(energy_gev=e, theta_rad=t)
                                      for e, t in zip(values, thetas))
        name = _PARTICLE_NAMES.get(version.particle, "Ele")
        call = self.generation.Generate(request, timeout=timeout or 1800 + 0.05 * total)
        try:
            return assemble_chunks(call, total, max_bytes, particle=name)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()  # no-op once the stream ended; stops the server after a local error

    # --- datasets -------------------------------------------------------------------------------

    def upload_dataset(self, path: str, name: str = "", *, particle: str = "",
                       labels: Optional[Mapping[str, str]] = None,
                       progress: Optional[Callable[[int, int], None]] = None,
                       chunk_bytes: int = 1 << 20,
                       timeout: Optional[float] = None) -> datasets_pb2.Dataset:
        """Uploads the HDF5 shower file at `path` as dataset `name` (default: the file name) and
        returns the stored Dataset once the server checked it. `progress(sent_bytes, total_bytes)`
        is called after each chunk is handed to gRPC (from gRPC's sending thread), last with
        sent == total; an exception it raises cancels the upload (nothing is stored) and is
        re-raised here. The SHA-256 is computed first and checked by the server. `timeout`
        defaults to 10 minutes plus 1 s per 10 MiB.

            ds = client.upload_dataset("Ele_calo.h5", progress=lambda s, t: print(f"{s}/{t}"))
            client.submit(model_preset="3dgan-25", dataset=ds.id, ...)
        """
        if not 1 <= chunk_bytes <= _UPLOAD_CHUNK_MAX:
            raise ValueError(f"chunk_bytes must be 1..{_UPLOAD_CHUNK_MAX}, got {chunk_bytes}")
        if particle and particle not in _PARTICLES:
            raise ValueError(f"particle {particle!r}: use one of {sorted(_PARTICLES)}")
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        file_name = os.path.basename(path)
        header = datasets_pb2.UploadDatasetHeader(
            name=name or file_name, size_bytes=size, sha256=digest.hexdigest(),
            particle=_PARTICLES.get(particle, common_pb2.PARTICLE_UNSPECIFIED),
            file_name=file_name, labels=dict(labels or {}))

        def requests() -> Iterator[datasets_pb2.UploadDatasetRequest]:
            yield datasets_pb2.UploadDatasetRequest(header=header)
            sent = 0
            with open(path, "rb") as f:
                while sent < size:
                    block = f.read(min(chunk_bytes, size - sent))
                    if not block:
                        return  # the file shrank: the server refuses the short upload
                    yield datasets_pb2.UploadDatasetRequest(chunk=block)
                    sent += len(block)
                    if progress is not None:
                        try:
                            progress(sent, size)
                        except BaseException as error:
                            aborted.append(error)
                            raise  # gRPC cancels the call

        aborted: List[BaseException] = []
        try:
            return self._call(self.datasets.UploadDataset, requests(),
                              timeout=timeout or 600 + size / (10 << 20))
        except GantryError:
            if aborted:
                raise aborted[0] from None
            raise

    def dataset(self, dataset: str) -> datasets_pb2.Dataset:
        """One dataset by id ("ds-<uuid>") or name."""
        return self._call(self.datasets.GetDataset,
                          datasets_pb2.GetDatasetRequest(dataset_id=dataset))

    # --- training -------------------------------------------------------------------------------

    def submit(self, spec: Union[training_pb2.JobSpec, Mapping[str, Any], None] = None, *,
               request_id: str = "", retries: int = 3, **fields: Any) -> training_pb2.Job:
        """Submits a training job and returns it (QUEUED). `spec` is a JobSpec or a dict in the
        JobSpec's JSON form (snake_case or camelCase); keyword arguments set top-level JobSpec
        fields on top of it (dicts for messages). The call carries an idempotency key
        (`request_id`, a fresh UUID by default), so it is retried up to `retries` times when the
        server is UNAVAILABLE without ever creating two jobs.

            job = client.submit(model_preset="3dgan-25", dataset="toymc:layout=25,events=20000",
                                world_size=2, hyper_parameters={"epochs": 30, "batch_per_rank": 64})
        """
        message = _spec_message(training_pb2.JobSpec, spec, fields)
        request = training_pb2.SubmitJobRequest(spec=message,
                                                request_id=request_id or str(uuid.uuid4()))
        delay = 0.5
        for attempt in range(retries + 1):
            try:
                return self._call(self.training.SubmitJob, request)
            except Unavailable:
                if attempt == retries:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    def estimate(self, spec: Union[training_pb2.JobSpec, Mapping[str, Any], None] = None,
                 **fields: Any) -> List[training_pb2.CostEstimate]:
        """Checks a JobSpec as `submit` would (same errors) without creating a job and returns
        the estimated duration, device-hours and cost on each eligible pool, cheapest first,
        each with its `basis` (SubmitJob with validate_only)."""
        message = _spec_message(training_pb2.JobSpec, spec, fields)
        request = training_pb2.SubmitJobRequest(spec=message, validate_only=True)
        return list(self._call(self.training.SubmitJob, request).estimates)

    def cost_report(self, group_by: Sequence[str] = (), *, tenant: str = "", pool: str = "",
                    start: Optional[float] = None,
                    end: Optional[float] = None) -> training_pb2.CostReport:
        """Device-hours and cost grouped by any of "tenant", "pool", "model", "day" over
        [start, end) (Unix seconds; default: this calendar month, UTC, up to now). `tenant`: ""
        for your own; admins any tenant or "*" for all."""
        request = training_pb2.GetCostReportRequest(group_by=list(group_by), tenant=tenant,
                                                    pool=pool)
        if start is not None:
            request.start_time.FromNanoseconds(int(start * 1e9))
        if end is not None:
            request.end_time.FromNanoseconds(int(end * 1e9))
        return self._call(self.training.GetCostReport, request)

    def job(self, job: Union[str, training_pb2.Job]) -> training_pb2.Job:
        """The job (by id or Job) as the server has it now, with its validation curve."""
        return self._call(self.training.GetJob, training_pb2.GetJobRequest(job_id=_job_id(job)))

    def cancel(self, job: Union[str, training_pb2.Job], reason: str = "") -> training_pb2.Job:
        """Requests cancellation (QUEUED -> CANCELLED at once; running -> CANCELLING)."""
        return self._call(self.training.CancelJob,
                          training_pb2.CancelJobRequest(job_id=_job_id(job), reason=reason))

    def watch(self, job: Union[str, training_pb2.Job], after_sequence: int = 0, *,
              max_reconnects: int = 10) -> Iterator[training_pb2.JobEvent]:
        """Yields the job's events (JobEvent: state changes, progress, logs, checkpoints, the
        registered model) after `after_sequence`, then live ones, until the job ends. When the
        stream drops (UNAVAILABLE: the connection or the server went away) it reconnects with
        backoff (0.5 s doubling to 10 s) and resumes after the last event it yielded, so no event
        is lost or repeated; it gives up with Unavailable after `max_reconnects` attempts in a row
        that brought no event. Closing the iterator (break) ends the call; to continue later,
        watch again with after_sequence = the last event's sequence.

            for event in client.watch(job):
                if event.HasField("progress"):
                    print(event.progress.step, event.progress.losses)
        """
        job_id = _job_id(job)
        last = after_sequence
        failures = 0
        delay = 0.5
        while True:
            call = self.training.WatchJob(
                training_pb2.WatchJobRequest(job_id=job_id, after_sequence=last))
            try:
                for event in call:
                    if event.sequence <= last:
                        continue  # already yielded before a reconnect
                    last = event.sequence
                    failures, delay = 0, 0.5
                    yield event
                return  # the job ended: the server closed the stream with OK
            except grpc.RpcError as error:
                typed = from_rpc_error(error)
                if not isinstance(typed, Unavailable) or failures >= max_reconnects:
                    raise typed from None
                failures += 1
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
            finally:
                call.cancel()

    def wait(self, job: Union[str, training_pb2.Job],
             on_event: Optional[Callable[[training_pb2.JobEvent], None]] = None,
             timeout: Optional[float] = None) -> training_pb2.Job:
        """Watches the job to its end (SUCCEEDED, FAILED or CANCELLED), calling `on_event` for each
        event, and returns the final Job. Raises DeadlineExceeded after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in self.watch(job):
            if on_event is not None:
                on_event(event)
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceeded(f"job {_job_id(job)} did not end within {timeout} s")
        final = self.job(job)
        if final.state not in _TERMINAL_STATES:
            raise GantryError(f"job {final.id} stream ended in state "
                              f"{training_pb2.JobState.Name(final.state)}")
        return final

    # --- studies --------------------------------------------------------------------------------

    def create_study(self, spec: Union[studies_pb2.StudySpec, Mapping[str, Any], None] = None, *,
                     request_id: str = "", **fields: Any) -> studies_pb2.Study:
        """Creates a hyper-parameter study and returns it (RUNNING; the server runs its trials).
        `spec` is a StudySpec or a dict in its JSON form; keyword arguments set top-level fields on
        top of it. Parameters are named by their JobSpec field path. The call carries an
        idempotency key (`request_id`, a fresh UUID by default).

            study = client.create_study(
                base_job={"model_preset": "3dgan-25", "dataset": "ds-...", "world_size": 1,
                          "hyper_parameters": {"epochs": 10, "batch_per_rank": 64}},
                parameters=[{"name": "hyper_parameters.learning_rate",
                             "kind": "KIND_LOG_CONTINUOUS", "min": 1e-4, "max": 1e-2}],
                algorithm="SEARCH_ALGORITHM_BAYESIAN", folds=3,
                budget={"max_trials": 20, "max_parallel_trials": 2})
        """
        message = _spec_message(studies_pb2.StudySpec, spec, fields)
        request = studies_pb2.CreateStudyRequest(spec=message,
                                                 request_id=request_id or str(uuid.uuid4()))
        return self._call(self.studies.CreateStudy, request)

    def study(self, study: Union[str, studies_pb2.Study]) -> studies_pb2.Study:
        """The study (by id or Study) with its trial counts, device-hours and best trial."""
        return self._call(self.studies.GetStudy,
                          studies_pb2.GetStudyRequest(study_id=_study_id(study)))

    def list_studies(self, limit: int = 50) -> List[studies_pb2.Study]:
        """The caller's studies, newest first (at most `limit`, 1..1000)."""
        request = studies_pb2.ListStudiesRequest(page=common_pb2.PageRequest(page_size=limit))
        return list(self._call(self.studies.ListStudies, request).studies)

    def trials(self, study: Union[str, studies_pb2.Study]) -> List[studies_pb2.Trial]:
        """The study's trials by number: parameters, fold results, objective mean and spread,
        state and device-hours."""
        request = studies_pb2.ListTrialsRequest(study_id=_study_id(study))
        return list(self._call(self.studies.ListTrials, request).trials)

    def cancel_study(self, study: Union[str, studies_pb2.Study],
                     reason: str = "") -> studies_pb2.Study:
        """Stops the study: no new trials, every trial job still running is cancelled."""
        return self._call(self.studies.CancelStudy,
                          studies_pb2.CancelStudyRequest(study_id=_study_id(study), reason=reason))

    def watch_study(self, study: Union[str, studies_pb2.Study]) -> Iterator[studies_pb2.StudyUpdate]:
        """Yields StudyUpdate (the study and all its trials) at once and at every change, until the
        study ends. Closing the iterator ends the call."""
        call = self.studies.WatchStudy(studies_pb2.WatchStudyRequest(study_id=_study_id(study)))
        try:
            yield from call
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        finally:
            call.cancel()

    def wait_study(self, study: Union[str, studies_pb2.Study],
                   on_update: Optional[Callable[[studies_pb2.StudyUpdate], None]] = None,
                   timeout: Optional[float] = None) -> studies_pb2.Study:
        """Watches the study to its end, calling `on_update` for each update, and returns the final
        Study. Raises DeadlineExceeded after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for update in self.watch_study(study):
            if on_update is not None:
                on_update(update)
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceeded(f"study {_study_id(study)} did not end within {timeout} s")
        final = self.study(study)
        if final.state not in _TERMINAL_STUDY_STATES:
            raise GantryError(f"study {final.id} stream ended in state "
                              f"{studies_pb2.StudyState.Name(final.state)}")
        return final


def _study_id(study: Union[str, studies_pb2.Study]) -> str:
    return study if isinstance(study, str) else study.id


def _job_id(job: Union[str, training_pb2.Job]) -> str:
    return job if isinstance(job, str) else job.id


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _number_or_pair(value: Any, what: str) -> Tuple[float, float]:
    if _is_number(value):
        return float(value), float(value)
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} with count must be a (min, max) pair or one number, "
                         f"got {value!r}") from None
    return lo, hi


def _per_shower(angles: Any, total: int, what: str) -> List[float]:
    if angles is None:
        return [0.0] * total
    if _is_number(angles):
        return [float(angles)] * total
    values = [float(a) for a in angles]
    if len(values) != total:
        raise ValueError(f"{len(values)} {what} for {total} showers")
    return values


def connect(server: Optional[str] = None, token: Optional[str] = None,
            ca_cert: Optional[str] = None, config: Optional[str] = None,
            timeout: float = 30.0, allow_plaintext: Optional[bool] = None) -> Client:
    """A Client from the same settings the CLI uses: arguments > GANTRY_SERVER / GANTRY_TOKEN /
    GANTRY_CA_CERT / GANTRY_ALLOW_PLAINTEXT > the config file (`config`, $GANTRY_CONFIG or
    ~/.config/gantry/config). A token goes in clear only to this host unless allow_plaintext."""
    return Client(resolve_settings(server, token, ca_cert, config, allow_plaintext),
                  timeout=timeout)


def showers_as_numpy(chunk: generation_pb2.GenerateChunk) -> Any:
    """A GenerateChunk's showers as a float32 numpy array of chunk.shape."""
    import numpy as np
    return np.frombuffer(chunk.showers, dtype="<f4").reshape(tuple(chunk.shape))
