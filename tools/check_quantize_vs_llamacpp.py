#!/usr/bin/python3
"""Compares `kvserve quantize` with llama.cpp's `llama-quantize --pure` byte
for byte (developer check, not run in CI: it needs a llama.cpp build, which
it does not make).

For each weight type, quantizes the F32 / F16 model IN with both tools and
compares every tensor the two files store in that type: equal, or the first
differing byte (block and byte in the block). Tensors that one tool left in
another type (llama.cpp falls back to a 32-element type for rows that are
not whole 256-element super-blocks; kvserve keeps them as they are) are
counted as skipped, with the types named.

Usage:
  check_quantize_vs_llamacpp.py IN.gguf [--types Q5_0,Q4_1,...]
      [--llama-bin ~/kvserve-ref/llama.cpp/build/bin] [--kvserve build/release/src/cli/kvserve]
      [--workdir DIR] [--threads N] [--keep]
Prints one Markdown table row per type; exit status 1 if any compared tensor
differs or a tool fails.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402  (the project's reader, for the metadata parsing)

# ggml type id -> (name, block elements, block bytes)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18),
    23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2),
}
DEFAULT_TYPES = "Q5_0,Q4_1,IQ4_NL,IQ4_XS,Q3_K,Q2_K"


class TensorIndex(gguf.GGUFReader):
    """The tensor table of a GGUF file (any tensor type): name -> (type id,
    dims, bytes)."""

    def _parse(self):  # the header and tensor infos only
        if bytes(self._take(4)) != gguf.GGUF_MAGIC:
            raise gguf.GGUFError("not a GGUF file")
        (self.version,) = self._unpack("<I")
        n_tensors, n_kv = self._unpack("<QQ")
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            self.metadata[key] = self._value(vtype)[0]
        align = int(self.metadata.get("general.alignment", gguf.DEFAULT_ALIGNMENT))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            dims = list(self._unpack("<" + "Q" * n_dims))
            gtype, offset = self._unpack("<IQ")
            infos.append((name, dims, gtype, offset))
        data = (self.pos + align - 1) // align * align
        self.index = {}
        for name, dims, gtype, offset in infos:
            _, blk, size = GGML_TYPES.get(gtype, ("?", 1, 0))
            n = 1
            for d in dims:
                n *= d
            start = data + offset
            self.index[name] = (gtype, dims, self.buf[start:start + n // blk * size])


def type_name(t):
    return GGML_TYPES.get(t, (f"type{t}",))[0]


def compare(path_a, path_b, want):
    """(compared, equal, differing [(name, where)], skipped [(name, ta, tb)])."""
    a, b = TensorIndex(path_a).index, TensorIndex(path_b).index
    compared, equal, diffs, skipped = 0, 0, [], []
    for name, (ta, dims, da) in a.items():
        if name not in b:
            skipped.append((name, type_name(ta), "missing"))
            continue
        tb, dims_b, db = b[name]
        if ta != want or tb != want:
            if ta != tb or len(dims) > 1:
                skipped.append((name, type_name(ta), type_name(tb)))
            continue
        compared += 1
        if bytes(da) == bytes(db) and dims == dims_b:
            equal += 1
            continue
        first = next((i for i in range(min(len(da), len(db))) if da[i] != db[i]), min(len(da), len(db)))
        size = GGML_TYPES[want][2]
        diffs.append((name, f"byte {first} (block {first // size}, byte {first % size} of {size})"))
    return compared, equal, diffs, skipped


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--types", default=DEFAULT_TYPES)
    p.add_argument("--llama-bin", default=os.path.expanduser("~/kvserve-ref/llama.cpp/build/bin"))
    p.add_argument("--kvserve", default="build/release/src/cli/kvserve")
    p.add_argument("--workdir", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--keep", action="store_true", help="keep the quantized files")
    args = p.parse_args(argv[1:])
    quantize = os.path.join(args.llama_bin, "llama-quantize")
    for tool in (quantize, args.kvserve):
        if not os.access(tool, os.X_OK):
            sys.stderr.write(f"error: {tool} is not an executable (this check does not build it)\n")
            return 2
    work = args.workdir or tempfile.mkdtemp(prefix="kvs_qcheck_")
    os.makedirs(work, exist_ok=True)
    want_ids = {v[0]: k for k, v in GGML_TYPES.items()}
    print(f"model: {args.model}")
    print("| type | tensors compared | equal | differing | skipped (llama.cpp / kvserve type) |")
    print("|---|---|---|---|---|")
    failed = False
    for t in args.types.split(","):
        out_l = os.path.join(work, f"llama-{t}.gguf")
        out_k = os.path.join(work, f"kvserve-{t}.gguf")
        rl = subprocess.run([quantize, "--pure", args.model, out_l, t, str(args.threads)],
                            capture_output=True, text=True)
        rk = subprocess.run([args.kvserve, "quantize", args.model, out_k, t], capture_output=True, text=True)
        if rl.returncode != 0 or rk.returncode != 0:
            failed = True
            why = (rl.stderr if rl.returncode else rk.stderr).strip().splitlines()[-1:]
            print(f"| {t} | tool failed: {'llama-quantize' if rl.returncode else 'kvserve'}: {why} | | | |")
            continue
        compared, equal, diffs, skipped = compare(out_l, out_k, want_ids[t])
        failed |= bool(diffs) or compared == 0
        diff_text = "; ".join(f"{n}: {w}" for n, w in diffs[:3]) + (" ..." if len(diffs) > 3 else "")
        skip_text = ", ".join(f"{n} ({a}/{b})" for n, a, b in skipped[:4]) + (" ..." if len(skipped) > 4 else "")
        print(f"| {t} | {compared} | {equal} | {len(diffs)}{': ' + diff_text if diffs else ''} | "
              f"{len(skipped)}{': ' + skip_text if skipped else ''} |")
        if not args.keep:
            for f in (out_l, out_k):
                os.remove(f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
