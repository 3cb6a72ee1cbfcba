#!/usr/bin/env python3
"""Plain PyTorch (eager) 3DGAN models, layer for layer the same as workers/gan, for side-by-side speed
comparisons with the LibTorch implementation (tests/bench/run_gan_bench.sh).

  pytorch_3dgan.py generate --preset 3dgan-25 --batch 128 --threads 2 --iters 10 [--variant V]
  pytorch_3dgan.py train    --preset 3dgan-25 --batch 64  --threads 2 --iters 5
  pytorch_3dgan.py generate --device cuda --variant compile-bf16 ...   (tests/gpu/run.sh)

Prints one line "RESULT <mode> <preset> <figure> <unit>". Needs Debian's python3-torch (run with
/usr/bin/python3 when a pyenv shim shadows it).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    # latent, dense (x,y,z,c), G filters, D filters, bn eps
    "3dgan-25": dict(latent=200, dense_c=8, g=[64, 6, 6], d=[32, 8, 8, 8], eps=1e-3),
    # tiny: topology only (its loss weights / BN momentum differ, see docs/MODELS.md); not benchmarked
    "tiny": dict(latent=16, dense_c=4, g=[8, 4, 4], d=[8, 8, 8, 8], eps=1e-3),
}


def same_pad(k):
    # TensorFlow "same" for stride 1: left (k-1)//2, right the rest; F.pad order is z, y, x.
    p = []
    for kk in reversed(k):
        p += [(kk - 1) // 2, kk - 1 - (kk - 1) // 2]
    return p


def sym_pad(x, y, z):
    return [z, z, y, y, x, x]


class Generator(nn.Module):
    def __init__(self, c):
        super().__init__()
        g = c["g"]
        self.dense_c = c["dense_c"]
        self.fc = nn.Linear(c["latent"], 7 * 7 * 8 * c["dense_c"])
        self.c1 = nn.Conv3d(c["dense_c"], g[0], (6, 6, 8))
        self.b1 = nn.BatchNorm3d(g[0], eps=c["eps"], momentum=0.01)
        self.c2 = nn.Conv3d(g[0], g[1], (6, 5, 8))
        self.b2 = nn.BatchNorm3d(g[1], eps=c["eps"], momentum=0.01)
        self.c3 = nn.Conv3d(g[1], g[2], (3, 3, 8))
        self.c4 = nn.Conv3d(g[2], 1, (2, 2, 2), bias=False)

    def forward(self, z):
        x = self.fc(z).view(-1, self.dense_c, 7, 7, 8)
        x = self.b1(F.leaky_relu(self.c1(F.pad(x, same_pad((6, 6, 8)))), 0.3))
        x = F.interpolate(x, scale_factor=(2, 2, 2), mode="nearest")
        x = self.b2(F.leaky_relu(self.c2(F.pad(x, sym_pad(2, 2, 0))), 0.3))
        x = F.interpolate(x, scale_factor=(2, 2, 3), mode="nearest")
        x = F.leaky_relu(self.c3(F.pad(x, sym_pad(1, 0, 3))), 0.3)
        return F.relu(self.c4(x))


class Discriminator(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d"]
        self.c1 = nn.Conv3d(1, d[0], 5)
        self.c2 = nn.Conv3d(d[0], d[1], 5)
        self.b2 = nn.BatchNorm3d(d[1], eps=c["eps"], momentum=0.01)
        self.c3 = nn.Conv3d(d[1], d[2], 5)
        self.b3 = nn.BatchNorm3d(d[2], eps=c["eps"], momentum=0.01)
        self.c4 = nn.Conv3d(d[2], d[3], 5)
        self.b4 = nn.BatchNorm3d(d[3], eps=c["eps"], momentum=0.01)
        feat = 11 * 11 * 11 * d[3]
        self.fake = nn.Linear(feat, 1)
        self.aux = nn.Linear(feat, 1)

    def forward(self, img):
        x = F.dropout(F.leaky_relu(self.c1(F.pad(img, same_pad((5, 5, 5)))), 0.3), 0.2, self.training)
        x = F.dropout(self.b2(F.leaky_relu(self.c2(F.pad(x, sym_pad(2, 2, 2))), 0.3)), 0.2, self.training)
        x = F.dropout(self.b3(F.leaky_relu(self.c3(F.pad(x, sym_pad(2, 2, 2))), 0.3)), 0.2, self.training)
        x = F.dropout(self.b4(F.leaky_relu(self.c4(F.pad(x, sym_pad(1, 1, 1))), 0.3)), 0.2, self.training)
        x = F.avg_pool3d(x, 2).flatten(1)
        return torch.sigmoid(self.fake(x)), self.aux(x), img.sum(dim=(1, 2, 3, 4)).unsqueeze(1)


def mape(pred, label):
    return 100.0 * ((label - pred).abs() / label.abs().clamp_min(1e-7)).mean()


def bce(pred, label):
    return F.binary_cross_entropy(pred.clamp(1e-7, 1 - 1e-7), label)


def ecal_target(e100):
    ratio = 0.0018 * e100**4 - 0.023 * e100**3 + 0.11 * e100**2 - 0.28 * e100 + 2.21
    return ratio * e100 * 100.0


class Gan:
    def __init__(self, preset, seed=1, device="cpu"):
        torch.manual_seed(seed)
        self.c = PRESETS[preset]
        self.dev = torch.device(device)
        self.g, self.d = Generator(self.c).to(self.dev), Discriminator(self.c).to(self.dev)
        self.go = torch.optim.RMSprop(self.g.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
        self.do = torch.optim.RMSprop(self.d.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)

    def noise(self, n):
        e100 = torch.empty(n, 1, device=self.dev).uniform_(0.1, 5.0)
        return e100 * torch.randn(n, self.c["latent"], device=self.dev), e100

    def d_loss(self, img, lab, e100, ecal):
        f, e, s = self.d(img)
        return 2.0 * bce(f, lab) + 0.1 * mape(e, e100) + 0.1 * mape(s, ecal)

    def step(self, images, e100, flip=0.05):
        n = images.shape[0]
        self.g.train(); self.d.train()
        z, fe = self.noise(n)
        with torch.no_grad():
            fake = self.g(z)
        ecal = images.sum(dim=(1, 2, 3, 4)).unsqueeze(1)
        for img, lab, en, ec in ((images, 1.0, e100, ecal), (fake, 0.0, fe, ecal_target(fe))):
            labels = torch.full((n, 1), lab, device=self.dev)
            flipm = torch.rand(n, 1, device=self.dev) < flip
            labels = torch.where(flipm, 1 - labels, labels)
            self.do.zero_grad()
            self.d_loss(img, labels, en, ec).backward()
            self.do.step()
        for _ in range(2):
            z, fe = self.noise(n)
            self.go.zero_grad()
            self.d_loss(self.g(z), torch.ones(n, 1, device=self.dev), fe, ecal_target(fe)).backward()
            self.go.step()


def generate(gan, a, batch, sync):
    z, _ = gan.noise(batch)
    g = gan.g
    if a.variant == "script":
        with torch.no_grad():
            g = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(gan.g, z)))
    if a.variant.startswith("compile"):
        g = torch.compile(gan.g)
    bf16 = a.variant.endswith("bf16")
    autocast = torch.autocast(gan.dev.type, dtype=torch.bfloat16, enabled=bf16)
    with torch.inference_mode(), autocast:
        for _ in range(a.warmup):
            g(z)
        sync()
        t = time.perf_counter()
        for _ in range(a.iters):
            g(z)
        sync()
        dt = time.perf_counter() - t
    print(f"RESULT generate {a.preset} {1000.0 * dt / (a.iters * batch):.4g} ms/shower"
          f" ({a.variant}, batch {batch})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["generate", "train"])
    ap.add_argument("--preset", default="3dgan-25")
    ap.add_argument("--batch", default="128",
                    help="a batch, or (generate) several separated by commas, run one after another")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    # generate only: eager float32; TorchScript traced, frozen and optimize_for_inference'd
    # (float32); eager under autocast to bfloat16; torch.compile'd (default mode), float32 or
    # under autocast to bfloat16.
    ap.add_argument("--variant", choices=["eager", "script", "autocast-bf16", "compile",
                                          "compile-bf16"], default="eager")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (times synchronise the device)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gan = Gan(a.preset, device=a.device)

    def sync():
        if gan.dev.type == "cuda":
            torch.cuda.synchronize(gan.dev)

    if a.mode == "generate":
        gan.g.eval()
        for batch in [int(b) for b in a.batch.split(",")]:
            generate(gan, a, batch, sync)
    else:
        batch = int(a.batch)
        images = torch.rand(batch, 1, 25, 25, 25, device=gan.dev) * 0.01
        e100 = torch.empty(batch, 1, device=gan.dev).uniform_(0.1, 5.0)
        for _ in range(a.warmup):
            gan.step(images, e100)
        sync()
        t = time.perf_counter()
        for _ in range(a.iters):
            gan.step(images, e100)
        sync()
        dt = time.perf_counter() - t
        print(f"RESULT train {a.preset} {a.iters * batch / dt:.2f} samples/s")


if __name__ == "__main__":
    main()
