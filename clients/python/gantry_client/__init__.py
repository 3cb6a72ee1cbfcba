"""gantry_client: the Python client of gantry (gantry.v1 over gRPC).

    import gantry_client
    with gantry_client.connect() as client:   # GANTRY_SERVER / GANTRY_TOKEN / config file, like the CLI
        job = client.submit(model_preset="tiny", dataset="toymc:events=200", world_size=1,
                            hyper_parameters={"epochs": 1, "batch_per_rank": 16})
        job = client.wait(job)                 # watches, resuming after a dropped stream
        showers = client.generate(job.model_ref, energies=(50, 150), count=100, seed=1)
        showers.to_hdf5("showers.h5")

The generated messages and stubs are gantry_client.v1 (training_pb2, training_pb2_grpc, ...);
errors are gantry_client.errors (NotFound, InvalidArgument, Unavailable, ...).
"""

from gantry_client._version import __version__
from gantry_client.client import (Client, Settings, connect, resolve_settings,
                                  showers_as_numpy)
from gantry_client.errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                                  FailedPrecondition, GantryError, Internal, InvalidArgument,
                                  NotFound, OutOfRange, PermissionDenied, ResourceExhausted,
                                  Unauthenticated, Unavailable, Unimplemented, Unknown)
from gantry_client.showers import ShowerArray, to_hdf5

__all__ = [
    "__version__", "Client", "Settings", "connect", "resolve_settings", "showers_as_numpy",
    "ShowerArray", "to_hdf5", "GantryError", "Aborted", "AlreadyExists", "Cancelled", "DataLoss",
    "DeadlineExceeded", "FailedPrecondition", "Internal", "InvalidArgument", "NotFound",
    "OutOfRange", "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable",
    "Unimplemented", "Unknown",
]
