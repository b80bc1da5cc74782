#!/usr/bin/env python3
"""PyTorch's elementwise kernels on the H200 at the sizes of talker's decoder (issue 21): how many
TB/s a streaming LeakyReLU and a three-input sum reach there, from L2-sized to 1 GB tensors."""
import time

import torch


def rate(fn, nbytes, reps=10):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return nbytes * reps / (time.perf_counter() - t) / 1e12


def main():
    print(torch.cuda.get_device_name(0), torch.__version__)
    for n in (16 << 20, 64 << 20, 247_267_328):
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        a, b = torch.randn_like(x), torch.randn_like(x)
        leaky = rate(lambda: torch.nn.functional.leaky_relu(x, 0.1, inplace=False), 8 * n)
        copy = rate(lambda: y.copy_(x), 8 * n)
        add3 = rate(lambda: torch.add(torch.add(x, a, out=y), b, out=y), 24 * n)
        print(f"{n:>11} floats: leaky_relu {leaky:.2f} TB/s, copy {copy:.2f} TB/s, two adds {add3:.2f} TB/s")
        del x, y, a, b
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
