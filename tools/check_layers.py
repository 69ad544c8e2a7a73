#!/usr/bin/env python3
"""The module layering holds: no file under src/MODULE includes a header of a
module listed after MODULE in the top CMakeLists.txt (lowest layer first),
and, given the kvserve binary, it defines no test fake (the Fake* classes
live in test libraries only).

Usage: check_layers.py SOURCE_DIR [KVSERVE_BINARY]   (exit 0: holds; 1: violations, listed)
"""
import pathlib
import re
import subprocess
import sys


def module_order(root: pathlib.Path) -> list[str]:
    text = (root / "CMakeLists.txt").read_text()
    m = re.search(r"foreach\(module ([a-z_ ]+)\)", text)
    if not m:
        sys.exit("check_layers: the module list (foreach(module ...)) is not in CMakeLists.txt")
    return m.group(1).split()


def include_violations(root: pathlib.Path, order: list[str]) -> list[str]:
    rank = {m: i for i, m in enumerate(order)}
    include = re.compile(r'\s*#\s*include\s+"([a-z_]+)/')
    found = []
    for module in order:
        for f in sorted((root / "src" / module).rglob("*")):
            if f.suffix not in (".h", ".cc"):
                continue
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = include.match(line)
                if m and m.group(1) in rank and rank[m.group(1)] > rank[module]:
                    found.append(f"{f.relative_to(root)}:{n}: {module} includes {m.group(1)} (a higher layer): {line.strip()}")
    return found


def fake_symbols(binary: str) -> list[str]:
    out = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    fake = re.compile(r"\bkvs::[a-z_:]*Fake[A-Za-z]*")
    return sorted({m.group(0) for line in out.splitlines() for m in [fake.search(line)] if m})


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    order = module_order(root)
    problems = include_violations(root, order)
    if len(sys.argv) > 2:
        problems += [f"{sys.argv[2]} defines test fake {s}" for s in fake_symbols(sys.argv[2])]
    for p in problems:
        print(p)
    print(f"check_layers: {len(order)} modules, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
