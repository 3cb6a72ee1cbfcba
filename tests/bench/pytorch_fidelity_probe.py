#!/usr/bin/env python3
"""gantry's tiny training recipe in plain PyTorch (eager), on the same toy Monte Carlo, to tell a
behaviour of gantry's implementation from one of the 3DGAN topology and recipe
(docs/studies/2026-11-28-fidelity-averages.md). The networks are tests/bench/pytorch_3dgan.py's
(layer for layer gantry's); the step is gantry's Trainer::Step: a discriminator update on the real
batch, one on a generated batch, two generator updates, labels flipped with probability 0.05,
RMSprop (alpha 0.9, eps 1e-7), BatchNorm momentum 0.1 (tiny). Conditions are fitted to the data as
gantry fits them: fake energies uniform over the data's range, the ecal target a degree-4 polynomial
of E/100 fitted to sum(cells x 100) / E.

  gantry-worker toymc --spec=toymc:layout=25,events=1000,seed=1,emin=10,emax=200 --out=toy.h5
  pytorch_fidelity_probe.py --data toy.h5 --steps 300 --every 50 --out probe
      [--latent 128 --lr 3e-4 --weights 6,0.1,0.4 --batch 16 --seed 1]

Every `--every` steps it generates 200 showers at the data's energies (eval mode), prints the losses and
the face statistics of shower_stats.py (its face_stats), and saves the first 100 showers (GeV) to OUT-STEP.npy.
Needs Debian's python3-torch, python3-h5py and python3-numpy; run with /usr/bin/python3.
"""
import argparse
import os
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_3dgan as P  # noqa: E402
from shower_stats import face_stats  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--out", default="probe")
    ap.add_argument("--latent", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weights", default="6,0.1,0.4")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    np.set_printoptions(precision=3, suppress=True, linewidth=250)
    torch.manual_seed(a.seed)
    weights = [float(w) for w in a.weights.split(",")]
    if len(weights) != 3:
        sys.exit("--weights takes three numbers: BCE, MAPE(E), MAPE(ecal)")

    with h5py.File(a.data, "r") as f:
        cells = np.asarray(f["ECAL"], dtype=np.float32) * 100.0
        energy = np.asarray(f["target"], dtype=np.float64)[:, 1]  # [PDG id, E (GeV), 0, 0]
    cells[cells < 1e-6] = 0.0
    images = torch.from_numpy(cells).unsqueeze(1)
    e100_data = energy / 100.0
    fit = np.polyfit(e100_data, cells.sum(axis=(1, 2, 3)) / (e100_data * 100.0), 4)
    e_lo, e_hi = float(e100_data.min()), float(e100_data.max())
    e100_all = torch.tensor(e100_data, dtype=torch.float32).unsqueeze(1)

    def ecal_target(e100):
        return torch.from_numpy(np.polyval(fit, e100.numpy())).float() * e100 * 100.0

    c = dict(P.PRESETS["tiny"])
    c["latent"] = a.latent
    g, d = P.Generator(c), P.Discriminator(c)
    for m in list(g.modules()) + list(d.modules()):
        if isinstance(m, torch.nn.BatchNorm3d):
            m.momentum = 0.1
    g_opt = torch.optim.RMSprop(g.parameters(), lr=a.lr, alpha=0.9, eps=1e-7)
    d_opt = torch.optim.RMSprop(d.parameters(), lr=a.lr, alpha=0.9, eps=1e-7)

    def loss(img, labels, e100, ecal):
        p, e, s = d(img)
        return weights[0] * P.bce(p, labels) + weights[1] * P.mape(e, e100) + weights[2] * P.mape(s, ecal)

    def conditions(n):
        e100 = torch.empty(n, 1).uniform_(e_lo, e_hi)
        return e100 * torch.randn(n, a.latent), e100

    def report(step):
        g.eval()
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():
            e100 = torch.rand(200, 1, generator=gen) * (e_hi - e_lo) + e_lo
            x = g(torch.randn(200, a.latent, generator=gen) * e100)[:, 0].numpy() / 100.0
        g.train()
        sf = (x.sum(axis=(1, 2, 3)) / (e100.numpy()[:, 0] * 100.0)).mean()
        print(f"step {step}: SF {sf:.4f} (data {cells.sum() / 100.0 / energy.sum():.4f})"
              f"  {face_stats(x) or 'every generated shower is empty'}", flush=True)
        np.save(f"{a.out}-{step}.npy", x[:100])

    n, count = a.batch, images.shape[0]
    order, cursor, start = torch.randperm(count), 0, time.time()
    for step in range(1, a.steps + 1):
        if cursor + n > count:
            order, cursor = torch.randperm(count), 0
        rows = order[cursor:cursor + n]
        cursor += n
        real, e100 = images[rows], e100_all[rows]
        z, fake_e100 = conditions(n)
        with torch.no_grad():
            fake = g(z)
        for img, label, en, ec in ((real, 1.0, e100, real.sum(dim=(1, 2, 3, 4)).unsqueeze(1)),
                                   (fake, 0.0, fake_e100, ecal_target(fake_e100))):
            labels = torch.full((n, 1), label)
            labels = torch.where(torch.rand(n, 1) < 0.05, 1 - labels, labels)
            d_opt.zero_grad()
            d_loss = loss(img, labels, en, ec)
            d_loss.backward()
            d_opt.step()
        for p in d.parameters():
            p.requires_grad_(False)
        for _ in range(2):
            z, fake_e100 = conditions(n)
            g_opt.zero_grad()
            g_loss = loss(g(z), torch.ones(n, 1), fake_e100, ecal_target(fake_e100))
            g_loss.backward()
            g_opt.step()
        for p in d.parameters():
            p.requires_grad_(True)
        if step % a.every == 0:
            print(f"step {step}: D {d_loss.item():.3f}  G {g_loss.item():.3f}  {time.time() - start:.0f} s",
                  flush=True)
            report(step)


if __name__ == "__main__":
    main()
