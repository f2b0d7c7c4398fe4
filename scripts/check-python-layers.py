#!/usr/bin/env python3
"""The Python package's layer rules (HACKING.md "Python layers"), checked from the source alone.

    scripts/check-python-layers.py [PACKAGE_DIR]      (default: python/driftscope)

Every module's imports are read with `ast` (module level and inside functions alike: an import
that runs late still ties the two modules together), relative imports resolved, and three rules
checked:
  1. no import circle between modules (each one is printed, module by module);
  2. a module imports only its own layer or the layers its layer may use (LAYERS below);
  3. across a layer boundary, no underscore name: neither a module whose path inside its layer
     has a component starting with "_" nor an imported name starting with "_" (the shared core,
     the package root's own modules, may be imported by module, never by private name; the
     front wires the commands and may import any module, never a private name). What
     the recorders lend the guard and the references goes through `driftscope.recorders.api`.
Exit 0 when all hold, 1 with one line per break otherwise. Needs no import of the package (no
numpy, no framework), so it runs in a fraction of a second.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "driftscope"

# layer -> (module prefixes that belong to it, layers it may import). A module belongs to the
# layer of its longest matching prefix; whatever matches none is the shared core.
LAYERS = {
    "core": ((), ()),
    "recorders": (("recorders",), ("core",)),
    "compare": (("_compare", "_check"), ("core",)),
    # Replay (issue 26) runs models on the guard's backends and the guard replays at the origins
    # its probe names: one layer, two rooms.
    "guard": (("_guard", "_replay"), ("core", "recorders")),
    "reference": (("reference",), ("core", "recorders")),
    # The public front: the package's __init__, `python -m driftscope` and the public module
    # paths kept for the recorders (driftscope.torch ...). They may import every layer.
    "front": (("__init__", "__main__", "torch", "onnxruntime", "litert", "llm"),
              ("core", "recorders", "compare", "guard", "reference")),
}
# Layers that may call the package root's public API (driftscope.open, .compare, .Writer) as a
# user does: the root imports none of them at import time, so this makes no circle.
ROOT_CLIENTS = ("recorders", "guard", "reference")
# The one door into the recorders from the other layers.
RECORDERS_API = "recorders.api"


def layer_of(rel: str) -> str:
    best, best_len = "core", -1
    for name, (prefixes, _) in LAYERS.items():
        for p in prefixes:
            if (rel == p or rel.startswith(p + ".")) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def modules(root: Path) -> dict:
    """Dotted name relative to the package ('' for its __init__) -> (path, is_package)."""
    found = {}
    # A compiled module (driftscope._core) is known by its stub, and has no imports of its own.
    for path in sorted(list(root.rglob("*.py")) + list(root.rglob("*.pyi"))):
        if path.suffix == ".pyi" and path.with_suffix(".py").exists():
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_pkg)
    return found


def imports(rel: str, path: Path, is_pkg: bool, known: dict):
    """(line, target module, imported names) for every import of a module of the package."""
    if path.suffix == ".pyi":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = rel.split(".") if rel else []
    package = here if is_pkg else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE:
                    yield node.lineno, ".".join(parts[1:]), []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            else:
                parts = (node.module or "").split(".")
                if parts[0] != PACKAGE:
                    continue
                target = parts[1:]
            target_name = ".".join(target)
            plain = []
            for alias in node.names:
                sub = ".".join(target + [alias.name])
                if sub in known:  # `from . import _core`: the submodule itself
                    yield node.lineno, sub, []
                else:
                    plain.append(alias.name)
            if plain or not node.names:
                yield node.lineno, target_name, plain


def cycles(graph: dict) -> list:
    """One circle per strongly connected component (Tarjan), as a closed path of modules."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    paths = []
    for comp in found:
        members = set(comp)
        # The shortest circle through the component's first module (breadth first).
        start = comp[0]
        prev, frontier, path = {start: None}, [start], None
        while frontier and path is None:
            nxt = []
            for v in frontier:
                if start in graph[v]:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path = path[::-1] + [start]
                    break
                for w in sorted(graph[v]):
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        paths.append((comp, path or comp + [comp[0]]))
    return paths


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_part(rel: str, layer: str) -> bool:
    """Does the module's path inside its layer have a component starting with '_'?"""
    parts = rel.split(".")
    prefixes = [p for p in LAYERS[layer][0] if rel == p or rel.startswith(p + ".")]
    skip = max((len(p.split(".")) for p in prefixes), default=0)
    if layer == "core":
        return False  # the root's own modules are the shared core: imported by module, freely
    return any(map(_private, parts[skip:]))


def main(argv: list) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "python" / PACKAGE
    known = modules(root)
    graph, problems = {m: set() for m in known}, []
    name = lambda m: f"{PACKAGE}.{m}" if m else PACKAGE  # noqa: E731
    for rel, (path, is_pkg) in known.items():
        src_layer = layer_of(rel) if rel else "front"
        for line, target, names in imports(rel, path, is_pkg, known):
            if target not in known:
                problems.append(f"{path}:{line}: imports {name(target)}, which is not a module of the package")
                continue
            if target != rel:
                graph[rel].add(target)
            dst_layer = layer_of(target) if target else "front"
            if dst_layer == src_layer:
                continue
            if target == "" and src_layer in ROOT_CLIENTS and not any(map(_private, names)):
                continue  # `import driftscope`: its public API, as any user calls it
            where = f"{path}:{line}: {name(rel)} ({src_layer})"
            if dst_layer not in LAYERS[src_layer][1]:
                problems.append(f"{where} imports {name(target)} ({dst_layer}): "
                                f"the {src_layer} layer may use {', '.join(LAYERS[src_layer][1]) or 'nothing'}")
                continue
            private = [n for n in names if _private(n)]
            if private:
                problems.append(f"{where} imports the private name(s) {', '.join(private)} of {name(target)}")
            if dst_layer == "recorders" and src_layer != "front" and target != RECORDERS_API:
                problems.append(f"{where} imports {name(target)}: other layers use the recorders "
                                f"through {name(RECORDERS_API)} only")
            elif src_layer != "front" and private_part(target, dst_layer):
                problems.append(f"{where} imports the private module {name(target)}")
    for comp, path in cycles(graph):
        problems.append(f"import circle of {len(comp)} modules: " + " -> ".join(name(m) for m in path)
                        + (f" (also: {', '.join(name(m) for m in comp if m not in path)})"
                           if len(comp) > len(set(path)) else ""))
    for p in problems:
        print(f"check-python-layers: {p}", file=sys.stderr)
    if problems:
        print(f"check-python-layers: {len(problems)} break(s) of the layer rules in {root}", file=sys.stderr)
        return 1
    print(f"check-python-layers: {len(known)} modules, {sum(map(len, graph.values()))} imports, "
          f"no circle, layers kept")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
