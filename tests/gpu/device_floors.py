#!/usr/bin/env python3
"""The device's floors for generation figures (tests/gpu/run.sh): measured copy bandwidth and matrix
rates of this device, and the work of one 3dgan-25 shower in tests/bench/pytorch_3dgan.py's generator
(the same network as workers/gan): the FLOPs of its convolutions and dense layer (2 per
multiply-add; the rest is elementwise), and the bytes its layers' outputs take (each written once
at least: a lower bound on memory traffic).

  device_floors.py [--device cuda] [--quick]

Prints "RESULT floors <json>": copy_gb_s (bytes read + written per second), bf16_tflops, fp32_tflops
(TF32 off), tf32_tflops, flops_per_shower, activation_bytes_per_shower (float32; half in bf16), and the
floors in showers/s each implies.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import pytorch_3dgan  # noqa: E402


def timed(fn, sync, iters):
    for _ in range(3):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes (checks the script on a CPU)")
    a = ap.parse_args()
    dev = torch.device(a.device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    n = 512 if a.quick else 8192
    copy_elems = (1 << 20) if a.quick else (1 << 30)  # 4 GiB of float32 on a GPU
    src = torch.empty(copy_elems, device=dev)
    dst = torch.empty_like(src)
    copy_s = timed(lambda: dst.copy_(src), sync, 10)
    del src, dst
    rates = {}
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp32", torch.float32, False),
                              ("tf32", torch.float32, True)):
        if dev.type == "cpu" and name == "tf32":
            continue
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.randn(n, n, device=dev, dtype=dtype)
        y = torch.randn(n, n, device=dev, dtype=dtype)
        rates[name] = 2 * n**3 / timed(lambda: x @ y, sync, 10) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False

    gan = pytorch_3dgan.Gan("3dgan-25", device=a.device)
    gan.g.eval()
    batch = 16
    z, _ = gan.noise(batch)
    out_bytes, flop_list = [], []

    def count(m, _inputs, o):
        out_bytes.append(o.numel() * o.element_size())
        if isinstance(m, torch.nn.Conv3d):
            k = m.kernel_size[0] * m.kernel_size[1] * m.kernel_size[2]
            flop_list.append(2 * o.numel() * (m.in_channels // m.groups) * k)
        elif isinstance(m, torch.nn.Linear):
            flop_list.append(2 * o.numel() * m.in_features)

    hooks = [m.register_forward_hook(count) for m in gan.g.modules() if not list(m.children())]
    with torch.inference_mode():
        gan.g(z)
    for h in hooks:
        h.remove()
    flops = sum(flop_list) / batch
    act_bytes = sum(out_bytes) / batch
    copy_gb_s = 2 * copy_elems * 4 / copy_s / 1e9
    result = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "copy_gb_s": round(copy_gb_s, 1),
        **{f"{k}_tflops": round(v, 3) for k, v in rates.items()},
        "flops_per_shower": round(flops),
        "activation_bytes_per_shower": round(act_bytes),
        # Each floor alone: showers/s if generation did nothing but that work at that rate.
        "floor_showers_s_bf16_compute": round(rates["bf16"] * 1e12 / flops),
        "floor_showers_s_fp32_compute": round(rates["fp32"] * 1e12 / flops),
        "floor_showers_s_fp32_memory": round(copy_gb_s * 1e9 / act_bytes),
        "floor_showers_s_bf16_memory": round(copy_gb_s * 1e9 / (act_bytes / 2)),
    }
    print("RESULT floors " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
