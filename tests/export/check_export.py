#!/usr/bin/env python3
"""Checks the files export_fixture wrote.

  check_export.py onnx-checker DIR     onnx.checker (Debian python3-onnx) accepts DIR/model.onnx,
                                       with the documented inputs, output, opset and metadata
  check_export.py pytorch DIR          clients/python/gantry_export rebuilds DIR/model.pt and
                                       reproduces DIR/expected.f32 to 1e-4 relative
Exits non-zero with a message on any failure.
"""
import json
import os
import sys

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOLERANCE = 1e-4


def load(directory):
    meta = json.load(open(os.path.join(directory, "meta.json")))
    n, grid = meta["count"], meta["grid"]
    f32 = lambda name: np.fromfile(os.path.join(directory, name), dtype=np.float32)
    latent = f32("latent.f32").reshape(n, meta["noise_dim"])
    energy = f32("energy.f32").reshape(n, 1)
    theta = f32("theta.f32").reshape(n, 1) if meta["variable_angle"] else None
    expected = f32("expected.f32").reshape(n, *grid)
    return meta, latent, energy, theta, expected


def compare(got, expected, what):
    """Relative to the largest cell of each shower: max |got - want| / max |want| <= 1e-4."""
    if got.shape != expected.shape:
        sys.exit("%s: shape %s, want %s" % (what, got.shape, expected.shape))
    if not np.all(np.isfinite(got)):
        sys.exit("%s: non-finite cells" % what)
    worst = 0.0
    for g, e in zip(got, expected):
        scale = float(np.abs(e).max())
        if scale == 0:
            sys.exit("%s: gantry generated an empty shower; the comparison would be vacuous" % what)
        worst = max(worst, float(np.abs(g - e).max()) / scale)
    sums = np.abs(got.reshape(len(got), -1).sum(1) / expected.reshape(len(got), -1).sum(1) - 1).max()
    print("%s: max |diff| / max |cell| = %.3g, max shower-sum relative error = %.3g" % (what, worst, sums))
    if worst > TOLERANCE or sums > TOLERANCE:
        sys.exit("%s: differs from gantry's generation by more than %g relative" % (what, TOLERANCE))


def onnx_checker(directory):
    import onnx
    path = os.path.join(directory, "model.onnx")
    onnx.checker.check_model(path, full_check=True)
    model = onnx.load(path)
    meta = json.load(open(os.path.join(directory, "meta.json")))
    opsets = {o.domain: o.version for o in model.opset_import}
    if opsets != {"": 13}:
        sys.exit("opset imports %s, want only the default domain at 13" % opsets)
    inputs = [i.name for i in model.graph.input]
    want = ["latent", "energy"] + (["theta"] if meta["variable_angle"] else [])
    if inputs != want:
        sys.exit("inputs %s, want %s" % (inputs, want))
    out = model.graph.output
    dims = [d.dim_param or d.dim_value for d in out[0].type.tensor_type.shape.dim]
    if len(out) != 1 or out[0].name != "shower" or dims != ["N"] + meta["grid"]:
        sys.exit("output %s %s, want shower [N, %s]" % (out[0].name, dims, meta["grid"]))
    props = {p.key: p.value for p in model.metadata_props}
    description = json.loads(props["gantry.description"])
    if description["preset"] != meta["preset"] or "gantry.config" not in props:
        sys.exit("metadata does not describe the model: %s" % sorted(props))
    ops = sorted({n.op_type for n in model.graph.node})
    print("onnx %s checker: ok; ir %d, opset 13, inputs %s, output shower %s, ops %s" %
          (onnx.__version__, model.ir_version, inputs, dims, ops))


def pytorch(directory):
    import torch
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    import gantry_export
    meta, latent, energy, theta, expected = load(directory)
    model = gantry_export.load(os.path.join(directory, "model.pt"))
    with torch.no_grad():
        args = [torch.from_numpy(latent), torch.from_numpy(energy)]
        if theta is not None:
            args.append(torch.from_numpy(theta))
        got = model(*args).numpy()
    compare(got, expected, "pytorch rebuild (torch %s)" % torch.__version__)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("onnx-checker", "pytorch"):
        sys.exit(__doc__)
    {"onnx-checker": onnx_checker, "pytorch": pytorch}[sys.argv[1]](sys.argv[2])
