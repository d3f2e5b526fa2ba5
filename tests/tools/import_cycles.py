#!/usr/bin/env python3
"""Import cycles of a Python package, and imports that reach up a layer.

    python3 tests/tools/import_cycles.py sphyr_hpc

Every import counts, also one inside a function: a lazy import hides a cycle
from the interpreter, not from the reader.  Reported, each with the imports
that make it (file:line):
- a cycle between modules;
- a cycle between folders (for example io/ -> solvers/ -> io/): one of them
  reaches up a layer;
- an import from a module in a subfolder of a module that sits in a folder
  above it (solvers/elasticity.py importing sphyr_hpc/_petsc.py): a folder's
  own modules are its top, above everything in its subfolders; the package
  face (__init__.py) counts only if it defines something.
Exits 1 if anything is reported, 0 if nothing is.
"""

import ast
import sys
from collections import defaultdict
from pathlib import Path


def module_name(root, path):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(root):
    """{module: {imported module: [line, ...]}} for the package's own modules."""
    files = {module_name(root, p): p for p in root.rglob("*.py") if not p.is_symlink()
             and not any(part.startswith(".") for part in p.parts)}
    edges = defaultdict(lambda: defaultdict(list))
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod and not (t == package and path.name != "__init__.py" and t + ".__init__" not in files
                                           and False):
                    if files[t].name == "__init__.py" and mod.startswith(t + "."):
                        continue  # a module importing its own package's face
                    edges[mod][t].append(node.lineno)
    return files, edges


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def folder(mod, files):
    return mod if files[mod].name == "__init__.py" else mod.rpartition(".")[0]


def _is_face(path):
    """An __init__.py that only hands names on (imports, __all__, a docstring)."""
    tree = ast.parse(path.read_text())
    return all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)) or
               (isinstance(n, ast.Assign) and [getattr(t, "id", "") for t in n.targets] == ["__all__"])
               for n in tree.body)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    files, edges = imports(root)
    found = 0
    for comp in cycles(files, edges):
        found += 1
        print(f"module cycle: {' <-> '.join(comp)}")
        for a in comp:
            for b, lines in edges[a].items():
                if b in comp:
                    print(f"  {files[a].relative_to(root.parent)}:{lines[0]} imports {b}")
    fedges = defaultdict(lambda: defaultdict(list))
    for a, targets in edges.items():
        for b, lines in targets.items():
            fa, fb = folder(a, files), folder(b, files)
            if fa != fb and not fa.startswith(fb + ".") and not fb.startswith(fa + "."):
                fedges[fa][fb].append(f"{files[a].relative_to(root.parent)}:{lines[0]} imports {b}")
    for comp in cycles({folder(m, files) for m in files}, fedges):
        found += 1
        print(f"folder cycle: {' <-> '.join(comp)}")
        for a in comp:
            for b, where in fedges[a].items():
                if b in comp:
                    for w in where:
                        print(f"  {w}")
    for a, targets in sorted(edges.items()):
        for b, lines in sorted(targets.items()):
            fa, fb = folder(a, files), folder(b, files)
            if fa.startswith(fb + ".") and not (files[b].name == "__init__.py" and _is_face(files[b])):
                found += 1
                print(f"reaches up: {files[a].relative_to(root.parent)}:{lines[0]} imports {b}")
    n_edges = sum(len(t) for t in edges.values())
    print(f"{len(files)} modules, {n_edges} imports between them, {found} cycle(s) or import(s) reaching up")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
