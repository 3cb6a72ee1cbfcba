#!/usr/bin/env python3
"""Metrics end to end: a real Prometheus scrapes a real gantry-server and gantry-worker daemon.

It starts a private PostgreSQL (deploy/local/pg.sh in a temporary GANTRY_PG_DIR), gantry-server and
one gantry-worker daemon with --metrics-listen, and /usr/bin/prometheus with a generated scrape
config (1 s interval, its own TSDB under the temporary directory), all on loopback ports
PORT_BASE..PORT_BASE+99. It lints both /metrics pages with promtool, runs a small training job and
a generation through the CLI, then asks Prometheus's HTTP API (/api/v1/targets, /api/v1/query) for
the expected series with plausible values, and runs every PromQL expression of the Grafana
dashboard (deploy/monitoring/grafana-gantry.json), which must be accepted and name only series
that exist. Everything it started is stopped on exit, also on failure or a signal.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy/monitoring/grafana-gantry.json")
TENANT = "metrics"
sys.path.insert(0, os.path.join(ROOT, "tests/support"))
from gantry_stack import Failure, GantryStack, Logger, run_stack  # noqa: E402

log = Logger("metrics-e2e")


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


class Stack(GantryStack):
    def __init__(self, args):
        super().__init__(args.build_dir, "metrics-e2e", args.port_base, log,
                         extra_bins={"prometheus": args.prometheus, "promtool": args.promtool})
        self.server_metrics = f"127.0.0.1:{args.port_base + 1}"
        self.worker_metrics = f"127.0.0.1:{args.port_base + 2}"
        self.prometheus = f"127.0.0.1:{args.port_base + 90}"

    # ------------------------------------------------------------------ Prometheus API
    def prom(self, path, **params):
        url = f"http://{self.prometheus}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            _, _, body = http_get(url)
        except urllib.error.HTTPError as e:
            body = e.read().decode()
        return json.loads(body)

    def query(self, expr):
        answer = self.prom("/api/v1/query", query=expr)
        if answer.get("status") != "success":
            raise Failure(f"Prometheus refused {expr!r}: {answer.get('error')}")
        return answer["data"]["result"]

    def value(self, expr):
        """The single value of an instant vector query; None when it is empty."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) != 1:
            raise Failure(f"{expr!r} has {len(result)} series, expected one: {result}")
        return float(result[0]["value"][1])

    # ------------------------------------------------------------------ start
    def start(self):
        self.start_postgres()
        self.start_server(["--metrics-listen", self.server_metrics])
        self.default_token = self.tenant(TENANT)
        self.start_worker("metrics-w1", slots=1,
                          extra_flags=["--labels", "pool=e2e", "--metrics-listen",
                                       self.worker_metrics])
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gantry-server
    static_configs:
      - targets: ["{self.server_metrics}"]
  - job_name: gantry-worker
    static_configs:
      - targets: ["{self.worker_metrics}"]
""")
        self.spawn("prometheus", [
            self.bins["prometheus"], f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(self.dir, 'tsdb')}",
            f"--web.listen-address={self.prometheus}", "--storage.tsdb.retention.time=1h",
            "--log.level=warn"])
        self.wait_for("Prometheus to be ready",
                      lambda: http_get(f"http://{self.prometheus}/-/ready")[0] == 200, 60)


# ---------------------------------------------------------------------- checks
def check_pages(stack):
    """Both /metrics pages: served with the 0.0.4 content type, accepted by promtool's linter."""
    for name, address in (("gantry-server", stack.server_metrics),
                          ("gantry-worker", stack.worker_metrics)):
        status, content_type, body = http_get(f"http://{address}/metrics")
        if status != 200 or "version=0.0.4" not in content_type:
            raise Failure(f"{name} /metrics: HTTP {status}, Content-Type {content_type!r}")
        lint = subprocess.run([stack.bins["promtool"], "check", "metrics"], input=body,
                              capture_output=True, text=True, timeout=30)
        if lint.returncode != 0:
            raise Failure(f"promtool check metrics of {name}:\n{lint.stdout}{lint.stderr}")
        try:
            urllib.request.urlopen(f"http://{address}/nothing-here", timeout=5)
            raise Failure(f"{name}: /nothing-here answered 200")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise Failure(f"{name}: /nothing-here answered {e.code}, expected 404")
        log(f"{name} /metrics: {len(body.splitlines())} lines, promtool clean")


def check_flag_errors(stack):
    """A malformed --metrics-listen is refused (exit 2), a taken one stops the process (exit 1),
    both with a message naming the flag."""
    join = stack.join_token_file
    cases = [
        ("gantry-server, malformed", 2,
         [stack.bins["server"], "--metrics-listen", "9100", "--db", stack.dsn]),
        ("gantry-server, taken", 1,
         [stack.bins["server"], "--listen", f"127.0.0.1:{stack.serve_port + 1}",
          "--metrics-listen", stack.server_metrics, "--db", stack.dsn,
          "--data-dir", os.path.join(stack.dir, "data2")]),
        ("gantry-worker daemon, malformed", 2,
         [stack.bins["worker"], "daemon", "--server", stack.grpc, "--join-token-file", join,
          "--cache-dir", os.path.join(stack.dir, "cache2"), "--metrics-listen", "[::1]9100"]),
        ("gantry-worker daemon, taken", 1,
         [stack.bins["worker"], "daemon", "--server", stack.grpc, "--join-token-file", join,
          "--name", "metrics-w2", "--cache-dir", os.path.join(stack.dir, "cache2"),
          "--serve-port", "-1", "--metrics-listen", stack.worker_metrics]),
    ]
    for what, code, cmd in cases:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=stack.dir)
        out = p.stdout + p.stderr
        if p.returncode != code or "--metrics-listen" not in out:
            raise Failure(f"{what}: exit {p.returncode} (expected {code}), output:\n{out[-800:]}")
    log(f"{len(cases)} bad or taken --metrics-listen refused with clear messages")


def run_workload(stack):
    spec = {
        "displayName": "metrics-e2e",
        "modelPreset": "tiny",
        "dataset": "toymc:layout=25,events=64,seed=3",
        "hyperParameters": {"epochs": 2, "batchPerRank": 8, "seed": "5"},
        "worldSize": 1,
        "resourcesPerRank": {"device": "DEVICE_KIND_CPU", "threads": 1},
        "validation": {"showersPerBin": 10},
        "modelName": "metrics-e2e",
    }
    path = os.path.join(stack.dir, "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    job = json.loads(stack.cli(["jobs", "submit", "--spec", path, "--json"]))["id"]
    log(f"submitted {job}")
    stack.cli(["jobs", "watch", job], timeout=400)
    got = json.loads(stack.cli(["jobs", "get", job, "--json"]))
    if got.get("state") != "JOB_STATE_SUCCEEDED" or not got.get("modelRef"):
        raise Failure(f"the job did not succeed with a model: {got.get('state')} "
                      f"{got.get('message')}")
    log(f"{job} SUCCEEDED, model {got['modelRef']}")
    stack.cli(["generate", got["modelRef"], "--energy", "10:200", "--count", "40", "--seed", "7",
               "--out", os.path.join(stack.dir, "generated.h5")], timeout=180)
    log("generated 40 showers")
    return job


def check_series(stack):
    targets = stack.prom("/api/v1/targets")["data"]["activeTargets"]
    health = {t["labels"]["job"]: (t["health"], t.get("lastError")) for t in targets}
    for job in ("gantry-server", "gantry-worker"):
        if health.get(job, ("missing",))[0] != "up":
            raise Failure(f"target {job} is not up: {health.get(job)}")
    log(f"targets up: {sorted(health)}")

    expectations = [
        # (PromQL, predicate on the value, what it means)
        (f'gantry_jobs{{tenant="{TENANT}",state="SUCCEEDED"}}', lambda v: v == 1,
         "one SUCCEEDED job of the tenant"),
        ('sum(gantry_jobs{state="QUEUED"}) or vector(0)', lambda v: v == 0, "nothing queued"),
        ('gantry_scheduler_queue_length', lambda v: v == 0, "the scheduler queue is empty"),
        ('gantry_job_queue_wait_seconds_count', lambda v: v >= 1, "a queue wait observed"),
        ('gantry_job_queue_wait_seconds_sum', lambda v: 0 <= v < 120, "a plausible queue wait"),
        ('gantry_scheduler_placement_seconds_count', lambda v: v >= 1, "scheduler passes timed"),
        ('gantry_job_gang_start_seconds_count', lambda v: v >= 1, "a gang start observed"),
        ('gantry_slots{pool="e2e",device="cpu",state="total"}', lambda v: v == 1,
         "one slot in pool e2e"),
        ('gantry_slots{pool="e2e",device="cpu",state="free"}', lambda v: v == 1,
         "the slot free again"),
        ('gantry_slots{pool="e2e",device="cpu",state="leased"}', lambda v: v == 0,
         "no slot leased"),
        ('gantry_workers{state="connected"}', lambda v: v == 1, "one connected worker"),
        ('sum(gantry_rpc_requests_total{method="/gantry.v1.TrainingService/SubmitJob",'
         'code="OK"})', lambda v: v >= 1, "SubmitJob counted"),
        ('sum(gantry_rpc_duration_seconds_count{method="/gantry.v1.TrainingService/SubmitJob"})',
         lambda v: v >= 1, "SubmitJob latency observed"),
        ('sum(gantry_rpc_requests_total{method="/gantry.v1.WorkerService/Register"})',
         lambda v: v >= 1, "the worker's Register counted"),
        ('gantry_generation_requests_total{code="OK"}', lambda v: v >= 1, "a Generate call"),
        ('gantry_generation_showers_total', lambda v: v >= 40, "40 showers streamed"),
        ('gantry_generation_duration_seconds_count{code="OK"}', lambda v: v >= 1,
         "Generate latency observed"),
        ('gantry_db_pool_connections{pool="main",state="in_use"} + '
         'ignoring(state) gantry_db_pool_connections{pool="main",state="idle"}',
         lambda v: v == 16, "the main pool has --db-pool-size (16) connections"),
        ('gantry_db_pool_acquired_total{pool="main"}', lambda v: v > 10,
         "pooled connections handed out"),
        ('gantry_worker_rank_steps_total{rank="0"}', lambda v: v >= 2,
         "steps of 2 epochs"),
        ('gantry_worker_rank_step_seconds_count{rank="0"} - '
         'gantry_worker_rank_steps_total{rank="0"}', lambda v: v == 0,
         "one step time observed per step"),
        ('gantry_worker_rank_step_seconds_sum{rank="0"}', lambda v: 0 < v < 300,
         "plausible step times"),
        ('gantry_worker_rank_samples_total{rank="0"} / gantry_worker_rank_steps_total{rank="0"}',
         lambda v: v == 8, "8 samples (the batch) per step"),
        ('gantry_worker_rank_allreduce_seconds_total{rank="0"}', lambda v: v == 0,
         "no all-reduce with world_size 1"),
        ('gantry_worker_rank_data_wait_seconds_total{rank="0"}', lambda v: v >= 0,
         "data wait recorded"),
        ('count(gantry_worker_rank_samples_per_second) or vector(0)', lambda v: v == 0,
         "the ended rank's gauges are gone"),
        ('gantry_worker_dataset_cache_misses_total + gantry_worker_dataset_cache_hits_total',
         lambda v: v >= 1, "the dataset went through the cache"),
        ('gantry_worker_dataset_cache_bytes{kind="used"}', lambda v: v > 0, "cache bytes used"),
        ('gantry_worker_generation_batches_total{outcome="ok"}', lambda v: v >= 1,
         "generator batches run"),
        ('gantry_worker_generation_showers_total', lambda v: v >= 40, "the worker made 40+"),
        ('gantry_worker_generation_batch_size_sum / gantry_worker_generation_batch_size_count',
         lambda v: 1 <= v <= 128, "a mean batch size within --max-batch-size"),
        ('gantry_worker_generation_queue_delay_seconds_count', lambda v: v >= 1,
         "queue delay observed"),
        ('gantry_worker_generation_compute_seconds_count', lambda v: v >= 1,
         "compute time observed"),
        ('gantry_worker_loaded_models', lambda v: v == 1, "the model stays loaded"),
        ('sum(gantry_worker_loaded_model_bytes)', lambda v: v > 0, "its memory"),
        ('sum(up{job=~"gantry-server|gantry-worker"})', lambda v: v == 2, "both targets up"),
    ]
    # The workload ended a moment ago: give the next scrapes time to land.
    def all_pass():
        failed = []
        for expr, ok, what in expectations:
            v = stack.value(expr)
            if v is None or not ok(v):
                failed.append(f"{what}: {expr} = {v}")
        return failed
    deadline = time.time() + 20
    failed = all_pass()
    while failed and time.time() < deadline:
        time.sleep(1)
        failed = all_pass()
    if failed:
        raise Failure("series not as expected:\n  " + "\n  ".join(failed))
    log(f"{len(expectations)} series checks passed")


def check_dashboard(stack):
    """Every panel's PromQL is accepted and names only series Prometheus has."""
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    names = set(stack.prom("/api/v1/label/__name__/values")["data"])
    exprs = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            exprs.append((panel["title"], target["expr"]))
    if len(exprs) < 20:
        raise Failure(f"the dashboard has only {len(exprs)} queries")
    problems = []
    for title, expr in exprs:
        concrete = expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
        if "$" in re.sub(r'"[^"]*"', "", concrete):
            problems.append(f"{title}: an unknown variable in {expr!r}")
            continue
        answer = stack.prom("/api/v1/query", query=concrete)
        if answer.get("status") != "success":
            problems.append(f"{title}: {answer.get('error')} in {expr!r}")
        for name in set(re.findall(r"\bgantry_[a-z0-9_]+", expr)):
            if name not in names:
                problems.append(f"{title}: no series {name}")
    if problems:
        raise Failure("dashboard queries:\n  " + "\n  ".join(problems))
    log(f"dashboard: {len(exprs)} queries of {len(dashboard['panels'])} panels accepted")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("GANTRY_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    ap.add_argument("--port-base", type=int, default=41200,
                    help="ports BASE..BASE+99 on 127.0.0.1 (server, metrics, rendezvous, "
                         "Prometheus)")
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")
    ap.add_argument("--promtool", default="/usr/bin/promtool")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    def body(stack):
        stack.start()
        check_pages(stack)
        check_flag_errors(stack)
        run_workload(stack)
        check_series(stack)
        check_dashboard(stack)

    return run_stack(log, lambda: Stack(args), body, args.keep,
                     ("server", "worker", "prometheus"))


if __name__ == "__main__":
    sys.exit(main())
