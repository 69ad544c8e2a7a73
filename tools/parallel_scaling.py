#!/usr/bin/env python3
"""The scaling model of docs/parallel.md: expected decode and prefill speed of
a model split over N hosts by tensor parallel (TP) or pipeline parallel (PP),
at several link speeds, from a host's measured compute rates.

Per host (measured on one machine, kvserve serve, see docs/parallel.md):
  --mem-gbs     bytes/s a decode step reads weights at (weights bytes x tg t/s)
  --flops       useful multiply-adds x 2 per second in prefill (2 x params x pp t/s)
Per link: bandwidth (Gbit/s, listed) and --latency-us per message (TCP,
one hop).

Decode of one sequence (T = 1), weights W bytes, L layers, hidden H:
  TP over N hosts: W / (N x mem) + 2 L x allreduce(4 H bytes)
  PP over N hosts: W / mem (the stages run one after another) + (N - 1) x
                   send(4 H); with N sequences in flight a stage is never
                   idle and throughput, not latency, grows up to N-fold.
Prefill of P tokens: 2 x params x P / (N x flops) + 2 L x allreduce(4 H P).
A ring all-reduce of B bytes over N hosts moves 2 (N - 1) / N x B per host
in 2 (N - 1) steps: 2 (N - 1) x latency + 2 (N - 1) / N x B / bandwidth.

Usage: tools/parallel_scaling.py [--mem-gbs 17] [--flops 2.0e11] [--latency-us 25]
Prints Markdown tables for the M model (1.1B, Q8_0) and Llama-3.1-70B Q4_K_M.
"""
import argparse

SHAPES = {
    # name: (weights bytes, params, layers, hidden)
    "M (1.1B, Q8_0)": (1.17e9, 1.1e9, 22, 2048),
    "Llama-3.1-70B (Q4_K_M)": (42.5e9, 70.6e9, 80, 8192),
}


def allreduce(nbytes, n, gbit, lat_us):
    if n == 1:
        return 0.0
    return 2 * (n - 1) * lat_us * 1e-6 + 2 * (n - 1) / n * nbytes / (gbit * 1e9 / 8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mem-gbs", type=float, default=17.0, help="GB/s of weights read per decode step, one host")
    ap.add_argument("--flops", type=float, default=2.0e11, help="prefill FLOP/s, one host")
    ap.add_argument("--latency-us", type=float, default=25.0)
    ap.add_argument("--prompt", type=int, default=2048)
    a = ap.parse_args()
    links = [10, 25, 100]
    hosts = [1, 2, 4, 8]
    for name, (w, params, layers, hidden) in SHAPES.items():
        print(f"### {name}\n")
        print(f"Decode, one sequence, tokens/s (TP; a host reads weights at {a.mem_gbs:g} GB/s, "
              f"{a.latency_us:g} us a message):\n")
        print("| hosts | " + " | ".join(f"{g} Gbit/s" for g in links) + " | comm share at 25 Gbit/s |")
        print("|---:|" + "---:|" * (len(links) + 1))
        for n in hosts:
            row = []
            for g in links:
                t = w / (n * a.mem_gbs * 1e9) + 2 * layers * allreduce(4 * hidden, n, g, a.latency_us)
                row.append(f"{1 / t:.1f}")
            tc = w / (n * a.mem_gbs * 1e9)
            comm = 2 * layers * allreduce(4 * hidden, n, 25, a.latency_us)
            print(f"| {n} | " + " | ".join(row) + f" | {100 * comm / (tc + comm):.0f} % |")
        print()
        print(f"Prefill of {a.prompt} tokens, tokens/s (TP; {a.flops:.2g} FLOP/s a host):\n")
        print("| hosts | " + " | ".join(f"{g} Gbit/s" for g in links) + " |")
        print("|---:|" + "---:|" * len(links))
        for n in hosts:
            row = []
            for g in links:
                t = 2 * params * a.prompt / (n * a.flops) + 2 * layers * allreduce(4 * hidden * a.prompt, n, g,
                                                                                    a.latency_us)
                row.append(f"{a.prompt / t:.0f}")
            print(f"| {n} | " + " | ".join(row) + " |")
        print()
        print("Decode with PP (one sequence / N sequences in flight), tokens/s at 25 Gbit/s:\n")
        print("| hosts | one sequence | N in flight (total) |")
        print("|---:|---:|---:|")
        for n in hosts:
            hop = (n - 1) * (a.latency_us * 1e-6 + 4 * hidden / (25e9 / 8))
            t = w / (a.mem_gbs * 1e9) + hop
            print(f"| {n} | {1 / t:.1f} | {n / t:.1f} |")
        print()


if __name__ == "__main__":
    main()
