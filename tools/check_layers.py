#!/usr/bin/env python3
"""Checks the physical design of src/ (ctest layering_test); exit 0 when every
rule holds, 1 with every violation listed.

Rules:
 1. Order: no file under src/MODULE includes a header of a module listed
    after MODULE in the top CMakeLists.txt's `foreach(module ...)` line
    (lowest layer first).
 2. Forbidden pairs (FORBIDDEN below): some modules must not include some
    lower ones either. The gateway is a router in front of replicas: it
    speaks their HTTP API and shares only the prefix-cache contract
    (kvcache/block_hash.h, kvcache/cache_events*.h) with them, so it
    includes nothing of the engine, the backends, the model or the server.
 3. No include cycle inside a module. The graph's nodes are components, not
    files: a header and the .cc files that implement it (its own X.cc, and
    X_part.cc files of a split implementation that have no header of their
    own; tests, benchmarks, fuzzers and mains are never part of a
    component; X_internal.h and X_impl.h, the private declarations X's files
    share, are part of X) are one node, and "A depends on B" when any file of A
    includes B's header. Why not headers alone: a circle of headers mostly
    breaks the build at once (under #pragma once one of them sees the other
    half-read), so a header-only rule would almost never fire, while the
    cycles that matter go through a .cc file: gateway.cc includes proxy.h
    while proxy.h includes gateway.h, and neither component can be built,
    linked, tested or understood without the other. Files stand for what
    they link to, so the .cc's includes are the component's dependencies.
    Every strongly connected set of components is reported, with one cycle
    through it and the include line of each step. There are no exceptions
    (the last cycles that predated the rule were split up for issue 32).
 4. Test fakes live in test folders: under src/, no file named fake_* and
    no class or struct Fake* outside a testing/ folder (module/testing/ is
    built only into test libraries and test binaries). A *_test.cc file may
    define a fake of its own: it is itself a test, built into its test
    binary only.
 5. Given the kvserve binary, it defines no Fake* symbol (nm).

Usage: check_layers.py SOURCE_DIR [KVSERVE_BINARY]
Self-test: tools/check_layers_test.py (ctest layering_selftest).
"""
import pathlib
import re
import subprocess
import sys

# module -> modules it must not include, whatever the order allows.
FORBIDDEN = {
    "gateway": {"engine", "backend", "model", "server"},
}

INCLUDE = re.compile(r'\s*#\s*include\s+"(([a-z_0-9]+)/[^"]+)"')
FAKE_CLASS = re.compile(r"^\s*(?:class|struct)\s+(Fake[A-Za-z0-9_]*)\b[^;]*$", re.M)
# Files that are never part of a component (rule 3): their own programs.
NOT_A_PART = re.compile(r"_(test|bench|fuzzer|main)$|^fake_")


def module_order(root: pathlib.Path) -> list[str]:
    text = (root / "CMakeLists.txt").read_text()
    m = re.search(r"foreach\(module ([a-z_0-9 ]+)\)", text)
    if not m:
        sys.exit("check_layers: the module list (foreach(module ...)) is not in CMakeLists.txt")
    return m.group(1).split()


def sources(root: pathlib.Path, module: str) -> list[pathlib.Path]:
    return sorted(f for f in (root / "src" / module).rglob("*") if f.suffix in (".h", ".cc") and f.is_file())


def includes(f: pathlib.Path):
    """(line number, line, included path, its module) of each quoted include."""
    for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield n, line.strip(), m.group(1), m.group(2)


def include_violations(root: pathlib.Path, order: list[str]) -> list[str]:
    rank = {m: i for i, m in enumerate(order)}
    found = []
    for module in order:
        banned = FORBIDDEN.get(module, set())
        for f in sources(root, module):
            for n, line, _, inc in includes(f):
                if inc in rank and rank[inc] > rank[module]:
                    found.append(f"{f.relative_to(root)}:{n}: {module} includes {inc} (a higher layer): {line}")
                elif inc in banned:
                    found.append(f"{f.relative_to(root)}:{n}: {module} must not include {inc}: {line}")
    return found


def component(f: pathlib.Path) -> str:
    """The node of f in rule 3's graph (a path without suffix)."""
    stem = f.with_suffix("")
    private = re.match(r"(.+)_(internal|impl)$", f.stem)
    if f.suffix == ".h" and private and f.with_name(private.group(1) + ".h").exists():
        return str(f.with_name(private.group(1)))  # X_internal.h: X's private half
    if f.suffix == ".h" or stem.with_suffix(".h").exists() or NOT_A_PART.search(f.stem):
        return str(stem)
    # X_part.cc of a split implementation: the longest X with a header.
    parts = f.stem.split("_")
    for k in range(len(parts) - 1, 0, -1):
        header = f.with_name("_".join(parts[:k]) + ".h")
        if header.exists():
            return str(header.with_suffix(""))
    return str(stem)


def strongly_connected(graph: dict[str, dict[str, tuple]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one node."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == node:
                        break
                if len(scc) > 1:
                    result.append(sorted(scc))
    return result


def witness_cycle(graph: dict[str, dict[str, tuple]], scc: list[str]) -> list[str]:
    """A shortest cycle through scc[0] inside the component (BFS)."""
    members, first = set(scc), scc[0]
    parent, frontier = {first: None}, [first]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph.get(node, {})):
                if nxt == first:
                    path = [node]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return list(reversed(path)) + [first]
                if nxt in members and nxt not in parent:
                    parent[nxt] = node
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return [first, first]


def cycle_violations(root: pathlib.Path, order: list[str]) -> list[str]:
    """The violations of rule 3."""
    found = []
    for module in order:
        graph: dict[str, dict[str, tuple]] = {}  # node -> {node it includes: (file, line no, line)}
        for f in sources(root, module):
            node = component(f)
            graph.setdefault(node, {})
            for n, line, path, inc in includes(f):
                target = root / "src" / path
                if inc != module or not target.exists():
                    continue
                dep = component(target)
                if dep != node:  # a .cc including its own header is no edge
                    graph[node].setdefault(dep, (f, n, line))
        for scc in strongly_connected(graph):
            rel = lambda node: str(pathlib.Path(node).relative_to(root / "src"))  # noqa: E731
            cycle = witness_cycle(graph, scc)
            steps = []
            for a, b in zip(cycle, cycle[1:]):
                f, n, line = graph[a][b]
                steps.append(f"{f.relative_to(root)}:{n}: {line}")
            found.append(f"include cycle in {module} among {', '.join(rel(s) for s in scc)}: "
                         f"{' -> '.join(rel(c) for c in cycle)} ({'; '.join(steps)})")
    return found


def fake_violations(root: pathlib.Path) -> list[str]:
    found = []
    for f in sorted((root / "src").rglob("*")):
        if not f.is_file() or "testing" in f.relative_to(root / "src").parts:
            continue
        rel = f.relative_to(root)
        if f.name.startswith("fake_"):
            found.append(f"{rel}: a test fake's file outside a testing/ folder (move it to src/<module>/testing/)")
            continue
        if f.suffix not in (".h", ".cc") or f.name.endswith("_test.cc"):
            continue
        for m in FAKE_CLASS.finditer(f.read_text(errors="replace")):
            found.append(f"{rel}: defines test fake {m.group(1)} outside a testing/ folder")
    return found


def fake_symbols(binary: str) -> list[str]:
    out = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    fake = re.compile(r"\bkvs::[a-z_:]*Fake[A-Za-z]*")
    return sorted({m.group(0) for line in out.splitlines() for m in [fake.search(line)] if m})


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    order = module_order(root)
    problems = include_violations(root, order) + cycle_violations(root, order) + fake_violations(root)
    if len(sys.argv) > 2:
        problems += [f"{sys.argv[2]} defines test fake {s}" for s in fake_symbols(sys.argv[2])]
    for p in problems:
        print(p)
    print(f"check_layers: {len(order)} modules, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
