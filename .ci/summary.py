"""The end of a CI run: how long each phase took, the slowest test binaries and tests,
and one closing line counting every test (nextest's and the doc tests') — the line CI
reads, so it is printed last.

Reads the phase times .ci/run wrote (name TAB seconds), nextest's JUnit report and the
two runners' logs; a file a failed run never wrote counts as empty.
"""

import argparse
import json
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

WARN_AFTER_S = 45 * 60


def minutes(s: float) -> str:
    return f"{int(s) // 60}:{int(s) % 60:02d}"


def read(path: str) -> str:
    p = Path(path)
    return p.read_text(errors="replace") if p.is_file() else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", required=True)
    ap.add_argument("--total", type=int, required=True)
    ap.add_argument("--junit", required=True)
    ap.add_argument("--timings", required=True)
    ap.add_argument("--tests-log", required=True)
    ap.add_argument("--doc-log", required=True)
    a = ap.parse_args()

    phases = []
    for line in read(a.phases).splitlines():
        name, _, secs = line.rpartition("\t")
        if name:
            phases.append((name, int(secs)))
    print("\n== summary")
    print(f"{'phase':<16} {'seconds':>8} {'m:ss':>7}")
    for name, secs in phases:
        print(f"{name:<16} {secs:>8} {minutes(secs):>7}")
    print(f"{'total':<16} {a.total:>8} {minutes(a.total):>7}")

    # cargo --timings: the build's slowest units (a crate, or one of its targets).
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\s*$", read(a.timings), re.M | re.S)
    if m:
        units = [u for u in json.loads(m.group(1)) if u["duration"] > 0]
        if not units:
            print("\nnothing was compiled")
        else:
            print(f"\nslowest compile units (of {len(units)}, {sum(u['duration'] for u in units):.0f} s in all)")
            for u in sorted(units, key=lambda u: -u["duration"])[:15]:
                what = f"{u['name']} {u.get('version', '')}{u.get('target', '')}"
                if u.get("mode") == "run-custom-build":
                    what += " (running its build script)"
                print(f"{u['duration']:>8.1f} s  {what}")

    cases = []
    if Path(a.junit).is_file():
        for suite in ET.parse(a.junit).getroot().iter("testsuite"):
            for case in suite.iter("testcase"):
                cases.append((suite.get("name", "?"), case.get("name", "?"), float(case.get("time", 0))))
    if cases:
        per_binary = defaultdict(float)
        for binary, _, t in cases:
            per_binary[binary] += t
        print("\nslowest test binaries (their tests' times added up; nextest runs them side by side)")
        for binary, t in sorted(per_binary.items(), key=lambda x: -x[1])[:15]:
            print(f"{t:>8.1f} s  {binary}")
        print("\nslowest tests")
        for binary, name, t in sorted(cases, key=lambda x: -x[2])[:15]:
            print(f"{t:>8.1f} s  {binary} {name}")

    if a.total > WARN_AFTER_S and phases:
        slowest = max(phases, key=lambda p: p[1])
        print(
            f"\nWARNING: CI took {minutes(a.total)}, over {WARN_AFTER_S // 60} minutes of its 90; "
            f"the slowest phase is {slowest[0]} ({minutes(slowest[1])})"
        )

    passed = failed = skipped = 0
    for line in read(a.tests_log).splitlines():
        if "tests run:" in line:
            counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|skipped|timed out)", line))
            passed += counts.get("passed", 0)
            failed += counts.get("failed", 0) + counts.get("timed out", 0)
            skipped += counts.get("skipped", 0)
    for m in re.finditer(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", read(a.doc_log), re.M):
        passed += int(m.group(1))
        failed += int(m.group(2))
        skipped += int(m.group(3))
    print(f"\n{passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main()
