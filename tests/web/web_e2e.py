#!/usr/bin/env python3
"""The web catalog end to end: headless Chromium against a real gantry-server, PostgreSQL and worker.

It starts a private PostgreSQL (deploy/local/pg.sh in a temporary GANTRY_PG_DIR), gantry-server
with --http-listen and --web-root (the app build/web that deploy/local/build.sh built) and one
gantry-worker daemon, all on 127.0.0.1 ports PORT_BASE..PORT_BASE+99. Through the CLI it makes two
tenants, trains a tiny model for tenant "alice" (web-ele:1, tagged), fine-tunes it (web-ele:2,
lineage parent web-ele:1), trains one for tenant "bob" (bob-secret:1) and starts a longer job of
alice's that keeps running. Then browser.mjs drives Debian's chromium through puppeteer-core
(tests/web/node_modules) over the real pages: redirect to login without a session, a refused
token, login, search and filters, a version page whose every plot is drawn with data (canvas
pixels of the series' colour), compare, the running job's loss curve growing from the live event
stream, setting an alias, generating and downloading an HDF5 file, bob's model being absent, and
log-out. The downloaded file is read here with h5py. Everything it started is stopped on exit,
also on failure or a signal.
"""
import argparse
import json
import subprocess
import os
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tests/support"))
from gantry_stack import Failure, GantryStack, Logger, run_stack  # noqa: E402

log = Logger("web-e2e")


class Stack(GantryStack):
    def __init__(self, args):
        super().__init__(args.build_dir, "web-e2e", args.port_base, log,
                         extra_bins={"chromium": args.chromium})
        self.web_root = os.path.join(self.build, "web")
        if not os.path.isfile(os.path.join(self.web_root, "app.js")):
            raise Failure(f"{self.web_root}/app.js is missing: deploy/local/build.sh builds the web app")
        if not os.path.isdir(os.path.join(HERE, "node_modules/puppeteer-core")):
            raise Failure("tests/web/node_modules/puppeteer-core is missing: run deploy/local/deps.sh")
        self.http = f"127.0.0.1:{args.port_base + 1}"

    def submit(self, tenant, model_name, epochs, initial_model="", events=64):
        spec = {
            "displayName": f"{model_name}-e{epochs}",
            "modelPreset": "tiny",
            "dataset": f"toymc:layout=25,events={events},seed=3",
            "hyperParameters": {"epochs": epochs, "batchPerRank": 8, "seed": "5"},
            "worldSize": 1,
            "resourcesPerRank": {"device": "DEVICE_KIND_CPU", "threads": 1},
            "validation": {"showersPerBin": 10},
            "modelName": model_name,
        }
        if initial_model:
            spec["initialModel"] = initial_model
        path = os.path.join(self.dir, f"job-{model_name}-{epochs}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        job = json.loads(self.cli(["jobs", "submit", "--spec", path, "--json"],
                                  self.tokens[tenant]))["id"]
        log(f"{tenant} submitted {job} ({model_name}, {epochs} epochs)")
        return job

    def finish(self, tenant, job):
        self.cli(["jobs", "watch", job], self.tokens[tenant], timeout=400)
        got = json.loads(self.cli(["jobs", "get", job, "--json"], self.tokens[tenant]))
        if got.get("state") != "JOB_STATE_SUCCEEDED" or not got.get("modelRef"):
            raise Failure(f"{job} did not succeed with a model: {got.get('state')} {got.get('message')}")
        log(f"{job} SUCCEEDED: {got['modelRef']}")
        return got["modelRef"]

    # ------------------------------------------------------------------ start
    def start(self):
        self.start_postgres()
        self.start_server(["--http-listen", self.http, "--web-root", self.web_root])
        self.wait_for("the HTTP listener", lambda: urllib.request.urlopen(
            f"http://{self.http}/", timeout=5).status == 200, 30)
        self.tenant("alice")
        self.tenant("bob")
        self.start_worker("web-w1", slots=2)


def run(stack, args):
    # Two slots: bob's model trains beside alice's first one, the fine-tuning beside the long job.
    first = stack.submit("alice", "web-ele", 1)
    secret = stack.submit("bob", "bob-secret", 1)
    v1 = stack.finish("alice", first)
    stack.cli(["models", "tag", v1, "campaign=web", "detector=ecal"], stack.tokens["alice"])
    bob_ref = stack.finish("bob", secret)
    tuned = stack.submit("alice", "web-ele", 1, initial_model=v1)
    # A job that runs for the whole browser session: its curve must grow on the job page.
    running = stack.submit("alice", "web-live", 400, events=256)
    v2 = stack.finish("alice", tuned)
    if (v1, v2, bob_ref) != ("web-ele:1", "web-ele:2", "bob-secret:1"):
        raise Failure(f"unexpected model references {v1}, {v2}, {bob_ref}")
    stack.wait_for("the long job to run", lambda: json.loads(stack.cli(
        ["jobs", "get", running, "--json"], stack.tokens["alice"])).get("state") == "JOB_STATE_RUNNING",
        120)

    downloads = os.path.join(stack.dir, "downloads")
    os.makedirs(downloads)
    env = dict(os.environ, WEB_BASE=f"http://{stack.http}", WEB_CHROMIUM=stack.bins["chromium"],
               WEB_TOKEN=stack.tokens["alice"], WEB_RUNNING_JOB=running,
               WEB_DOWNLOADS=downloads, WEB_PROFILE=os.path.join(stack.dir, "chromium-profile"),
               WEB_SCREENSHOTS=os.path.abspath(args.screenshots) if args.screenshots else "")
    if args.hold:
        # For working on browser.mjs: run it by hand against this stack, as often as needed.
        with open(os.path.join(stack.dir, "browser.env"), "w") as f:
            for k, v in env.items():
                if k.startswith("WEB_"):
                    f.write(f"export {k}='{v}'\n")
        log(f"holding: source {stack.dir}/browser.env, run node tests/web/browser.mjs; Ctrl-C ends")
        while True:
            time.sleep(1)
            stack.check_alive()
    t0 = time.time()
    browser = stack.spawn("browser", ["node", os.path.join(HERE, "browser.mjs")], env=env,
                          watch=False, own_group=True)
    try:
        code = browser.wait(timeout=240)
    except subprocess.TimeoutExpired:
        raise Failure(f"browser.mjs did not finish in 240 s:\n{stack.tail('browser', 60)}")
    print(stack.tail("browser", 200), end="")
    if code != 0:
        raise Failure(f"browser.mjs failed (exit {code})")
    log(f"browser checks passed in {time.time() - t0:.0f} s")
    if args.screenshots:
        shrink_screenshots(args.screenshots)
    files = [f for f in os.listdir(downloads) if f.endswith(".h5")]
    if len(files) != 1:
        raise Failure(f"expected one downloaded .h5 file, found {os.listdir(downloads)}")
    check_download(os.path.join(downloads, files[0]))
    stack.cli(["jobs", "cancel", running], stack.tokens["alice"])


def shrink_screenshots(folder):
    """64-colour palettes: a third of the size, the same look for flat pages and plots."""
    from PIL import Image  # python3-pil, in deploy/local/env.sh's package list
    for name in sorted(os.listdir(folder)):
        if name.endswith(".png"):
            path = os.path.join(folder, name)
            image = Image.open(path).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
            image.save(path, optimize=True)
            log(f"screenshot {name}: {os.path.getsize(path)} bytes")


def check_download(path):
    """The file the browser saved: 20 showers of the 25x25x25 grid at 50-100 GeV, as asked."""
    if not os.path.isfile(path):
        raise Failure(f"the generated file {path} was not downloaded")
    import h5py
    import numpy
    # The 3DGAN layout the CLI writes: ECAL [n, x, y, z] and target [n, 4] = (PDG id, E in GeV, ...).
    with h5py.File(path, "r") as f:
        names = sorted(f.keys())
        if "ECAL" not in f or "target" not in f:
            raise Failure(f"the downloaded HDF5 has datasets {names}, not ECAL and target")
        cells, target = numpy.asarray(f["ECAL"]), numpy.asarray(f["target"])
    if target.ndim != 2 or target.shape[1] < 2:
        raise Failure(f"the downloaded target has shape {target.shape}, expected [n, 4]")
    e = target[:, 1]
    if not (target[:, 0] == 11).all():
        raise Failure(f"the downloaded particles are {set(target[:, 0])}, expected electrons (11)")
    if cells.shape[0] != 20 or cells.shape[1:] != (25, 25, 25):
        raise Failure(f"the downloaded showers have shape {cells.shape}, expected (20, 25, 25, 25)")
    if e.shape[0] != 20 or e.min() < 50 or e.max() > 100:
        raise Failure(f"the downloaded energies {e} are not 20 values within 50-100 GeV")
    if not numpy.isfinite(cells).all() or cells.sum() <= 0:
        raise Failure("the downloaded showers are not finite or hold no energy")
    log(f"downloaded HDF5: datasets {names}, showers {cells.shape}, energies {e.min():.1f}-{e.max():.1f} GeV")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("GANTRY_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    ap.add_argument("--port-base", type=int, default=48000,
                    help="ports BASE..BASE+99 on 127.0.0.1 (gRPC, HTTP, serving, rendezvous)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--screenshots", default="",
                    help="write PNG screenshots of the main pages into this folder (docs/web)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--hold", action="store_true",
                    help="set everything up, then wait (for running browser.mjs by hand)")
    args = ap.parse_args()

    def body(stack):
        stack.start()
        run(stack, args)

    return run_stack(log, lambda: Stack(args), body, args.keep, ("server", "worker", "browser"))


if __name__ == "__main__":
    sys.exit(main())
