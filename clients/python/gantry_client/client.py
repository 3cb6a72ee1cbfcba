"""Connection to gantry-server: settings resolution, the bearer token and the service stubs."""

import dataclasses
import os
import sys
import types
from typing import Optional

import grpc

# The generated stubs live outside this package (they are build output); GANTRY_PY_STUBS may name
# their directory when it is not already on sys.path.
if os.environ.get("GANTRY_PY_STUBS") and os.environ["GANTRY_PY_STUBS"] not in sys.path:
    sys.path.insert(0, os.environ["GANTRY_PY_STUBS"])

from gantry.v1 import (  # noqa: E402  (after the sys.path set-up above)
    admin_pb2, admin_pb2_grpc, catalog_pb2, catalog_pb2_grpc, common_pb2, datasets_pb2,
    datasets_pb2_grpc, generation_pb2, generation_pb2_grpc, training_pb2, training_pb2_grpc)

DEFAULT_SERVER = "127.0.0.1:50051"


@dataclasses.dataclass
class Settings:
    server: str = DEFAULT_SERVER
    token: str = ""
    ca_cert: str = ""


def _read_config_file(path: str) -> dict:
    values = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ValueError(f"config {path}:{number}: expected 'key = value'")
            key, value = (part.strip() for part in line.split("=", 1))
            if key not in ("server", "token", "ca_cert"):
                raise ValueError(f"config {path}:{number}: unknown key '{key}'")
            values[key] = value.strip("'\"")
    return values


def resolve_settings(server: Optional[str] = None, token: Optional[str] = None,
                     ca_cert: Optional[str] = None, config: Optional[str] = None) -> Settings:
    """Arguments > GANTRY_SERVER/GANTRY_TOKEN/GANTRY_CA_CERT > config file, as the CLI does."""
    path = config or os.environ.get("GANTRY_CONFIG")
    explicit = bool(path)
    if not path:
        path = os.path.join(os.path.expanduser("~"), ".config", "gantry", "config")
    file_values = {}
    if os.path.exists(path):
        file_values = _read_config_file(path)
    elif explicit:
        raise FileNotFoundError(f"config file {path} does not exist")

    def pick(arg, env_name, key, default=""):
        if arg is not None:
            return arg
        if os.environ.get(env_name):
            return os.environ[env_name]
        return file_values.get(key, default)

    return Settings(server=pick(server, "GANTRY_SERVER", "server", DEFAULT_SERVER),
                    token=pick(token, "GANTRY_TOKEN", "token"),
                    ca_cert=pick(ca_cert, "GANTRY_CA_CERT", "ca_cert"))


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call (works on plaintext channels too)."""

    def __init__(self, token: str):
        self._metadata = ("authorization", f"Bearer {token}")

    def _details(self, details):
        metadata = list(details.metadata or []) + [self._metadata]
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


class Client:
    """The stubs of every public gantry.v1 service on one channel. `pb` holds the message modules."""

    pb = types.SimpleNamespace(common=common_pb2, training=training_pb2, datasets=datasets_pb2,
                               catalog=catalog_pb2, generation=generation_pb2, admin=admin_pb2)

    def __init__(self, settings: Settings):
        self.settings = settings
        if settings.ca_cert:
            with open(settings.ca_cert, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            channel = grpc.secure_channel(settings.server, credentials)
        else:
            channel = grpc.insecure_channel(settings.server)
        if settings.token:
            channel = grpc.intercept_channel(channel, _BearerToken(settings.token))
        self.channel = channel
        self.training = training_pb2_grpc.TrainingServiceStub(channel)
        self.datasets = datasets_pb2_grpc.DatasetServiceStub(channel)
        self.catalog = catalog_pb2_grpc.CatalogServiceStub(channel)
        self.generation = generation_pb2_grpc.GenerationServiceStub(channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(server: Optional[str] = None, token: Optional[str] = None,
            ca_cert: Optional[str] = None, config: Optional[str] = None) -> Client:
    return Client(resolve_settings(server, token, ca_cert, config))


def showers_as_numpy(chunk):
    """A GenerateChunk's showers as a float32 numpy array of chunk.shape (needs numpy)."""
    import numpy as np
    return np.frombuffer(chunk.showers, dtype="<f4").reshape(tuple(chunk.shape))
