#!/usr/bin/env python3
"""Submit a toy training job, list the caller's jobs, cancel the job, and show the model catalog.

    VENV/bin/pip install --no-build-isolation --no-index build/clients/python/dist/gantry_client-*.whl
    GANTRY_SERVER=127.0.0.1:50051 GANTRY_TOKEN=... VENV/bin/python clients/python/examples/submit_and_list.py
"""

import sys

import grpc

from gantry_client import connect

TIMEOUT = 30  # seconds; every call carries a deadline


def main() -> int:
    with connect() as client:
        pb = client.pb
        spec = pb.training.JobSpec(
            display_name="python-example", model_preset="tiny", dataset="toymc:events=200,seed=1",
            world_size=1, labels={"client": "python"},
            hyper_parameters=pb.training.HyperParameters(epochs=2, batch_per_rank=16))
        job = client.training.SubmitJob(pb.training.SubmitJobRequest(spec=spec), timeout=TIMEOUT)
        print(f"submitted {job.id} {pb.training.JobState.Name(job.state)} ({job.reason})")

        listing = client.training.ListJobs(
            pb.training.ListJobsRequest(label_selector={"client": "python"}), timeout=TIMEOUT)
        for j in listing.jobs:
            print(f"listed {j.id} {j.spec.display_name} {pb.training.JobState.Name(j.state)}")

        cancelled = client.training.CancelJob(
            pb.training.CancelJobRequest(job_id=job.id, reason="example done"), timeout=TIMEOUT)
        print(f"cancelled {cancelled.id} {pb.training.JobState.Name(cancelled.state)}")

        models = client.catalog.ListModels(pb.catalog.ListModelsRequest(), timeout=TIMEOUT)
        print(f"models {len(models.models)}")

        try:
            client.training.GetJob(pb.training.GetJobRequest(job_id="job-does-not-exist"),
                                   timeout=TIMEOUT)
        except grpc.RpcError as error:
            print(f"error {error.code().name}: {error.details()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
