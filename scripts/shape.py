#!/usr/bin/env python3
"""The code's shape, as #47 measures it: functions over 80/100 lines (from `fn` to its
closing brace), files over 600 lines, module import circles per crate, pub fields of the
TUI's state, places that check a permission. Tests, benches and data tables aside.

    python3 scripts/shape.py [--list]
"""
import os, re, sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = ("demo/data", "demo/catalog", "testkit")  # data tables and fixtures


def rust_files(base):
    for d, _, fs in os.walk(base):
        for f in fs:
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def is_test(path):
    return "/tests/" in path or path.endswith("/tests.rs") or "/benches/" in path or "/examples/" in path


def strip(src):
    """Source without comments, strings and char literals (same line count)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or src.startswith("'\\u{", i):
            j = src.find("'", i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_mod_lines(text):
    """Line ranges of `#[cfg(test)] mod … { }` blocks."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        spans.append((text.count("\n", 0, m.start()) + 1, text.count("\n", 0, j) + 1))
    return spans


def functions(path):
    text = strip(open(path, encoding="utf-8").read())
    tests = test_mod_lines(text)
    for m in re.finditer(r"\bfn\s+(\w+)", text):
        line = text.count("\n", 0, m.start()) + 1
        if any(a <= line <= b for a, b in tests):
            continue
        # the body: the first `{` after the signature at depth 0 (skip `;` = no body)
        j, depth_p = m.end(), 0
        while j < len(text):
            ch = text[j]
            if ch in "(<[":
                depth_p += 1
            elif ch in ")>]":
                depth_p -= 1
            elif ch == ";" and depth_p <= 0:
                j = -1
                break
            elif ch == "{" and depth_p <= 0:
                break
            j += 1
        if j < 0 or j >= len(text):
            continue
        depth = 0
        k = j
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        end = text.count("\n", 0, k) + 1
        yield m.group(1), line, end - line + 1


def crate_modules(crate_src):
    """module path -> file, for one crate's src/."""
    mods = {}
    for f in rust_files(crate_src):
        rel = os.path.relpath(f, crate_src)[:-3]
        parts = rel.split(os.sep)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        mods["::".join(parts)] = f
    return mods


WHY = {}


def circles(crate_src):
    mods = crate_modules(crate_src)
    edges = defaultdict(set)
    for name, f in mods.items():
        if is_test(f):
            continue
        text = strip(open(f, encoding="utf-8").read())
        for a, b in test_mod_lines(text):
            lines = text.split("\n")
            text = "\n".join(l if not (a <= i + 1 <= b) else "" for i, l in enumerate(lines))
        here = name.split("::") if name else []
        is_dir = os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs")
        for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
            path = m.group(2).strip(":").split("::")
            if m.group(1) == "crate":
                target = []
            else:
                target = list(here if is_dir else here[:-1])
                target = target[:-1] if not is_dir or True else target
                target = list(here[:-1]) if not is_dir else list(here[:-1])
                while path and path[0] == "super":
                    path = path[1:]
                    target = target[:-1]
            target = target + path
            while target and "::".join(target) not in mods:
                target = target[:-1]
            t = "::".join(target)
            related = t == name or name.startswith(t + "::") or t.startswith(name + "::") or not t or not name
            if not related:
                edges[name].add(t)
                WHY.setdefault((name, t), m.group(0))
    # strongly connected components (Tarjan)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

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

    for v in list(mods):
        if v not in index:
            visit(v)
    return out


def main():
    listing = "--list" in sys.argv
    crates = sorted(os.listdir(os.path.join(ROOT, "crates")))
    srcs = [(c, os.path.join(ROOT, "crates", c, "src")) for c in crates] + [("dlq-triage", os.path.join(ROOT, "src"))]
    long80, long100, big = [], [], []
    for c, s in srcs:
        for f in rust_files(s):
            rel = os.path.relpath(f, ROOT)
            if is_test(f) or any(d in rel for d in DATA):
                continue
            text = open(f, encoding="utf-8").read()
            spans = test_mod_lines(strip(text))
            lines = text.count("\n") - sum(b - a + 1 for a, b in spans)
            if lines > 600:
                big.append((lines, rel))
            for name, line, n in functions(f):
                if n > 80:
                    long80.append((n, f"{rel}:{line} {name}"))
                if n > 100:
                    long100.append((n, f"{rel}:{line} {name}"))
    print(f"functions over 80 lines: {len(long80)}")
    print(f"functions over 100 lines: {len(long100)}")
    if listing:
        for n, w in sorted(long80, reverse=True):
            print(f"  {n:4} {w}")
    print(f"files over 600 lines (tests aside): {len(big)}")
    if listing:
        for n, w in sorted(big, reverse=True):
            print(f"  {n:4} {w}")
    total = 0
    for c, s in srcs:
        cs = circles(s)
        total += len(cs)
        if cs:
            print(f"import circles in {c}: {len(cs)}" + ("".join(f"\n  {' ↔ '.join(x)}" for x in cs) if listing else ""))
            if "--edges" in sys.argv:
                for x in cs:
                    for (a, b), why in sorted(WHY.items()):
                        if a in x and b in x:
                            print(f"    {a} → {b}  ({why})")
    print(f"import circles, all crates: {total}")
    state = os.path.join(ROOT, "crates/tui/src/state.rs")
    if os.path.exists(state):
        t = open(state, encoding="utf-8").read()
        m = re.search(r"pub struct AppState\s*\{(.*?)\n\}", t, re.S)
        if m:
            n = len(re.findall(r"^\s*pub\s+\w+\s*:", m.group(1), re.M))
            print(f"pub fields of AppState: {n}")
    checks = defaultdict(int)
    for c, s in srcs:
        for f in rust_files(s):
            if is_test(f):
                continue
            text = strip(open(f, encoding="utf-8").read())
            for a, b in test_mod_lines(text):
                pass
            n = len(re.findall(r"\.(require|may)\(\s*(dlq_core::access::)?Permission::|\brequire_permission\(|\.may_view_payloads\(|\bread_only\b\s*\{|if\s+[\w.]*read_only\b", text))
            if n:
                checks[c] += n
    print("places that check a permission or --read-only: " + ", ".join(f"{c} {n}" for c, n in sorted(checks.items())))


if __name__ == "__main__":
    main()
