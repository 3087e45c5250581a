"""Allocation and free of a 1 MiB tensor on the npu device beside the same on the CPU, in one
run (issue 49: the npu once paid a driver allocation per tensor). Prints microseconds per
alloc+free for each device, the best of --repeats rounds of --iterations each, and the ratio.

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib .venv/bin/python bench/npu_alloc.py

Best of rounds, not mean: on a shared VM the slow rounds measure the neighbours."""
import argparse
import time

import torch

import backplane


def per_call_us(device: str, nbytes: int, iterations: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            torch.empty(nbytes, dtype=torch.uint8, device=device)  # freed at once: no reference kept
        best = min(best, (time.perf_counter() - start) / iterations * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    backplane.load("npu")
    for device in ("cpu", "npu"):  # warm: the npu's first call takes a segment from the driver
        per_call_us(device, args.bytes, 10, 1)
    cpu = per_call_us("cpu", args.bytes, args.iterations, args.repeats)
    npu = per_call_us("npu", args.bytes, args.iterations, args.repeats)
    print(f"torch {torch.__version__}, {args.bytes} bytes, best of {args.repeats} x {args.iterations}")
    print(f"cpu: {cpu:.2f} us per alloc+free")
    print(f"npu: {npu:.2f} us per alloc+free")
    print(f"npu/cpu: {npu / cpu:.2f}")


if __name__ == "__main__":
    main()
