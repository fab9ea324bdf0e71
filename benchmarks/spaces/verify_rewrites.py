#!/usr/bin/env python3
"""Check the .tsl spaces of this folder against their published definitions.

The five spaces come from the construction benchmark of Willemsen, van
Nieuwpoort and van Werkhoven (arXiv 2509.26253), recorded in
data/bench/spaces/construction_spaces.json with their restrictions as Python
expressions, where `/` is TRUE division. tessel's `/` is FLOOR division and
`%` Python's modulo, so every restriction that divides is rewritten in the
.tsl files. This script reads the .tsl files themselves (a small tokenizer for
the subset they use) and, for each space:

  1. checks that the parameters and their value sets equal the published ones;
  2. pairs the i-th `require` with the i-th published restriction and
     brute-forces both over the domains of the parameters they read (not the
     whole Cartesian product): the rewrite evaluated with tessel's semantics
     (`/` floor, `%` Python modulo, `let`s and `const`s substituted), the
     original with Python's. Prints OK or MISMATCH with a counterexample.
     A restriction that divides is checked again with each parameter it reads
     in 1 .. 16 and true division done in exact rationals (fractions), which
     shows the rewrite is an identity, not an accident of the domains.
  3. with --count: counts the valid configs of the whole space twice, with the
     rewritten and with the original restrictions (backtracking over
     independent groups, each restriction checked as soon as its parameters
     are bound), and compares both with the published count.

Exit status 0 when everything matches, 1 otherwise. Python 3.8+, stdlib only.

    python3 benchmarks/spaces/verify_rewrites.py [--count] [--data DIR]
"""

import argparse
import itertools
import json
import math
from fractions import Fraction
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent

# .tsl file -> the "name" of its entry in construction_spaces.json.
SPACES = {
    "hotspot.tsl": "Hotspot",
    "gemm_clblast.tsl": "GEMM (CLBlast)",
    "atf_prl_2x2.tsl": "ATF PRL 2x2",
    "atf_prl_4x4.tsl": "ATF PRL 4x4",
    "atf_prl_8x8.tsl": "ATF PRL 8x8",
}

KEYWORDS = {"space", "param", "const", "let", "require", "when", "target"}
WORD_OPERATORS = {"and", "or", "not"}
TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<string>"[^"\n]*")|(?P<number>\d+)|(?P<ident>[A-Za-z_]\w*)
       |(?P<punct>\.\.|==|!=|<=|>=|[-+*/%<>(){}:,=])""",
    re.VERBOSE,
)


def tokenize(text, file):
    tokens, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            line = text.count("\n", 0, pos) + 1
            raise SyntaxError(f"{file}:{line}: unexpected {text[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind:
            tokens.append((kind, m.group(kind)))
    return tokens


class TslSpace:
    """The parts of one `space` block this script needs."""

    def __init__(self, name):
        self.name = name
        self.params = {}     # name -> list of int values, declared order
        self.consts = {}     # name -> int
        self.lets = {}       # name -> list of tokens
        self.requires = []   # list of token lists


def parse_tsl(path):
    """Parses the subset of the .tsl language the benchmark spaces use."""
    toks = tokenize(path.read_text(), path.name)
    i = 0

    def expect(value):
        nonlocal i
        if toks[i][1] != value:
            raise SyntaxError(f"{path.name}: expected {value!r}, got {toks[i][1]!r}")
        i += 1

    def expression():
        """Tokens up to the next statement keyword, message or closing brace."""
        nonlocal i
        out, depth = [], 0
        while True:
            kind, text = toks[i]
            if depth == 0 and (kind == "string" or text == "}" or
                               (kind == "ident" and text in KEYWORDS)):
                return out
            depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(text, 0)
            out.append((kind, text))
            i += 1

    expect("space")
    space = TslSpace(toks[i][1])
    i += 1
    expect("{")
    while toks[i][1] != "}":
        word = toks[i][1]
        i += 1
        if word == "param":
            name = toks[i][1]
            i += 1
            expect(":")
            space.params[name] = domain(expression(), path)
        elif word == "const":
            name = toks[i][1]
            i += 1
            expect("=")
            space.consts[name] = int(toks[i][1])
            i += 1
        elif word == "let":
            name = toks[i][1]
            i += 1
            expect("=")
            space.lets[name] = expression()
        elif word == "require":
            space.requires.append(expression())
            if toks[i][0] == "string":
                i += 1
        else:
            raise SyntaxError(f"{path.name}: unsupported statement {word!r}")
    return space


def domain(tokens, path):
    texts = [t for _, t in tokens]
    if texts[0] == "{":
        return [int(t) for t in texts[1:-1:2]]
    if len(texts) in (3, 5) and texts[1] == "..":
        step = int(texts[4]) if len(texts) == 5 else 1
        return list(range(int(texts[0]), int(texts[2]) + 1, step))
    raise SyntaxError(f"{path.name}: unsupported domain {' '.join(texts)}")


def to_python(tokens, space):
    """A tessel expression as Python text with tessel's semantics: `/` becomes
    `//` (floor division; `%` is already Python's modulo), lets and consts are
    substituted, so the result reads parameters only."""
    out = []
    for kind, text in tokens:
        if kind == "ident" and text in space.lets:
            out.append("(" + to_python(space.lets[text], space) + ")")
        elif kind == "ident" and text in space.consts:
            out.append(str(space.consts[text]))
        elif text == "/":
            out.append("//")
        else:
            out.append(text)
    return re.sub(r"\( | \)", lambda m: m.group(0).strip(), " ".join(out))


def names_read(python_text, params):
    return sorted({w for w in re.findall(r"[A-Za-z_]\w*", python_text)
                   if w not in WORD_OPERATORS and w in params},
                  key=list(params).index)


def predicate(text, names):
    """A restriction as a function of `names` (positional). A failing
    evaluation (division by zero) rejects the config, as in tessel."""
    fn = eval(f"lambda {', '.join(names)}: {text}", {})

    def holds(*values):
        try:
            return bool(fn(*values))
        except ZeroDivisionError:
            return False
    return holds


def compare(original, rewrite, names, domains, exact=False):
    """Evaluates both over the product of `domains` (one list per name).
    The original reads Python ints (true division gives floats), or with
    exact=True Fractions, so that true division is exact rational arithmetic.
    Returns (points, points the original accepts, first counterexample)."""
    a, b = predicate(original, names), predicate(rewrite, names)
    points, accepted, counterexample = 0, 0, None
    for values in itertools.product(*domains):
        expected = a(*map(Fraction, values)) if exact else a(*values)
        got = b(*values)
        points += 1
        accepted += expected
        if expected != got and counterexample is None:
            counterexample = (dict(zip(names, values)), expected, got)
    return points, accepted, counterexample


def report(status_ok, text, counterexample):
    print(f"  {'OK' if status_ok else 'MISMATCH':8}  {text}")
    if counterexample:
        env, expected, got = counterexample
        print(f"{'':12}at {env}: published {expected}, rewrite {got}")


def check_restrictions(tsl, published, wide):
    """Step 2: each rewrite against its original. Returns True when all agree.
    A restriction that divides is also checked with every parameter it reads
    ranging over 1 .. wide, in exact rational arithmetic, to show the rewrite
    does not lean on the published domains."""
    ok = True
    originals = published["restrictions"]
    if len(originals) != len(tsl.requires):
        report(False, f"{len(tsl.requires)} requires, {len(originals)} published restrictions", None)
        return False
    domains = published["params"]
    for index, (original, tokens) in enumerate(zip(originals, tsl.requires), 1):
        rewrite = to_python(tokens, tsl)
        names = sorted(set(names_read(original, domains)) | set(names_read(rewrite, domains)),
                       key=list(domains).index)
        points, accepted, bad = compare(original, rewrite, names, [domains[n] for n in names])
        ok &= bad is None
        report(bad is None, f"#{index:<2} {points:>7} points, {accepted:>7} pass  {original}"
               + ("" if same(original, rewrite) else f"\n{'':25}as {rewrite}"), bad)
        if "/" in original and wide > 0:
            points, accepted, bad = compare(original, rewrite, names,
                                            [range(1, wide + 1)] * len(names), exact=True)
            ok &= bad is None
            report(bad is None, f"#{index:<2} {points:>7} points, {accepted:>7} pass  "
                   f"(each of {', '.join(names)} in 1 .. {wide}, exact)", bad)
    return ok


def same(a, b):
    """Equal up to spaces and one pair of outer parentheses."""
    a, b = (re.sub(r"\s+", "", t) for t in (a, b))
    return a == b or a == f"({b})" or b == f"({a})"


def check_domains(tsl, published):
    """Step 1: same parameters, same value sets (order aside), same Cartesian size."""
    ok = True
    params = published["params"]
    if list(tsl.params) != list(params):
        print(f"  MISMATCH  parameters {list(tsl.params)} vs published {list(params)}")
        ok = False
    for name, values in params.items():
        if sorted(tsl.params.get(name, [])) != sorted(values):
            print(f"  MISMATCH  {name}: {tsl.params.get(name)} vs published {values}")
            ok = False
    cartesian = math.prod(len(v) for v in tsl.params.values())
    if cartesian != published["cartesian"]:
        print(f"  MISMATCH  Cartesian {cartesian} vs published {published['cartesian']}")
        ok = False
    if ok:
        print(f"  OK        {len(params)} parameters and domains, Cartesian {cartesian:,}")
    return ok


def count_valid(params, restrictions):
    """Step 3: exact count of the configs that pass every restriction (Python
    text over `params`). Parameters tied by no restriction form independent
    groups whose counts multiply; within a group, each restriction is checked
    at the last of its parameters in declared order."""
    order = list(params)
    reads = [names_read(r, params) for r in restrictions]
    parent = {p: p for p in order}

    def find(p):
        while parent[p] != p:
            p = parent[p]
        return p

    for names in reads:
        for n in names[1:]:
            parent[find(n)] = find(names[0])
    total = 1
    for root in dict.fromkeys(find(p) for p in order):
        group = [p for p in order if find(p) == root]
        checks = [[] for _ in group]
        for r, names in zip(restrictions, reads):
            if names and find(names[0]) == root:
                fn = eval("lambda " + ", ".join(group) + ": " + r)
                checks[max(group.index(n) for n in names)].append(fn)
        total *= count_group(group, [params[p] for p in group], checks)
    return total


def count_group(group, domains, checks):
    args = [0] * len(group)
    last = len(group) - 1

    def ok(level):
        try:
            return all(fn(*args) for fn in checks[level])
        except ZeroDivisionError:
            return False

    def walk(level):
        n = 0
        for v in domains[level]:
            args[level] = v
            if ok(level):
                n += 1 if level == last else walk(level + 1)
        return n

    return walk(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=pathlib.Path, default=HERE.parents[1] / "data",
                        help="the data/ folder holding bench/spaces/construction_spaces.json")
    parser.add_argument("--count", action="store_true",
                        help="also count each whole space (a few seconds)")
    parser.add_argument("--wide", type=int, default=16, metavar="N",
                        help="also check each dividing rewrite with its parameters in 1 .. N "
                             "(exact rationals; 0 skips; default 16)")
    args = parser.parse_args()
    published = {s["name"]: s for s in json.loads(
        (args.data / "bench" / "spaces" / "construction_spaces.json").read_text())}
    all_ok = True
    for file, name in SPACES.items():
        tsl = parse_tsl(HERE / file)
        print(f"{file} ({name}, space {tsl.name})")
        entry = published[name]
        all_ok &= check_domains(tsl, entry)
        all_ok &= check_restrictions(tsl, entry, args.wide)
        if args.count:
            rewrites = [to_python(t, tsl) for t in tsl.requires]
            for label, restrictions in (("rewritten", rewrites), ("published", entry["restrictions"])):
                n = count_valid(entry["params"], restrictions)
                status = "OK" if n == entry["valid"] else "MISMATCH"
                all_ok &= n == entry["valid"]
                print(f"  {status:8}  valid count, {label} restrictions: {n:,} "
                      f"(published {entry['valid']:,})")
    print("all OK" if all_ok else "MISMATCH found")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
