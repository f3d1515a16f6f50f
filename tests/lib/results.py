#!/usr/bin/env python3
"""The reader of the test layers' one result protocol (tests/lib/report.sh):
TAP lines, "ok - D", "not ok - D", "ok - D # SKIP".

  results.py count FILE         prints "PASSED FAILED SKIPPED" of one file
  results.py from-trs DIR       prints a TAP line per test of automake's
                                harness under DIR (its .trs files), for
                                the layers that are a `make check`
  results.py summary DIR        one line per layer (DIR/<n>-<layer>.tap, in
                                the order of n), "LAYER: N passed, N failed"
                                (", N skipped"), then each failed check again
                                with its layer, then "total: ..."; exit 1
                                when a check failed
"""
import os
import re
import sys

LINE = re.compile(r"^(not ok|ok)\b(?:\s+\d+)?\s*(?:-\s*)?(.*)$")
SKIP = re.compile(r"#\s*SKIP\b", re.IGNORECASE)


def read(path):
    """(passed, failed, skipped, [failed descriptions]) of one TAP file; a
    line that is not TAP (a plan, a comment) counts for nothing."""
    passed = failed = skipped = 0
    failures = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line.rstrip("\n"))
                if not m:
                    continue
                if m.group(1) == "not ok":
                    failed += 1
                    failures.append(m.group(2))
                elif SKIP.search(m.group(2)):
                    skipped += 1
                else:
                    passed += 1
    except FileNotFoundError:
        pass
    return passed, failed, skipped, failures


def from_trs(top):
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".trs"):
                continue
            test = os.path.relpath(os.path.join(root, name[: -len(".trs")]), top)
            with open(os.path.join(root, name), errors="replace") as f:
                results = [l.split(":", 2)[2].strip() for l in f if l.startswith(":test-result:")]
            for r in results or ["ERROR"]:
                if r in ("PASS", "XFAIL"):
                    print(f"ok - {test}")
                elif r == "SKIP":
                    print(f"ok - {test} # SKIP")
                else:
                    print(f"not ok - {test} ({r}{failed_inside(os.path.join(root, name[:-4] + '.log'))})")


# The failed checks a test's own log names ("not ok ..." of the harnesses'
# TAP-like lines, "FAIL: ..." of the shell ones), so that the summary says
# which check of a test of ~100 failed, not only the test (its log can be
# gone with the build tree distcheck removes).
FAILED_IN_LOG = re.compile(r"^(?:not ok\b\s*(?:\d+\s*)?(?:-\s*)?|FAIL: )(.*)$")


def failed_inside(log, most=3):
    try:
        with open(log, errors="replace") as f:
            names = [m.group(1).strip() for m in map(FAILED_IN_LOG.match, f) if m]
    except OSError:
        return ""
    if not names:
        return ""
    more = f"; and {len(names) - most} more" if len(names) > most else ""
    return ": " + "; ".join(n[:200] for n in names[:most]) + more


def summary(top):
    layers = []
    for name in os.listdir(top):
        m = re.match(r"^(\d+)-(.+)\.tap$", name)
        if m:
            layers.append((int(m.group(1)), m.group(2), os.path.join(top, name)))
    layers.sort()
    total = [0, 0, 0]
    failed_lines = []
    for _, layer, path in layers:
        p, f, s, failures = read(path)
        total[0] += p
        total[1] += f
        total[2] += s
        print(f"{layer}: {p} passed, {f} failed" + (f", {s} skipped" if s else ""))
        failed_lines += [f"{layer}: {d}" for d in failures]
    if failed_lines:
        print("\n=== the failed checks, by layer ===")
        for l in failed_lines[:400]:
            print("FAIL " + l)
        if len(failed_lines) > 400:
            print(f"... and {len(failed_lines) - 400} more")
    skip_note = f", {total[2]} skipped (not passed)" if total[2] else ""
    print(f"total: {total[0]} passed, {total[1]} failed{skip_note}")
    return 1 if total[1] else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "count":
        p, f, s, _ = read(argv[2])
        print(p, f, s)
        return 0
    if len(argv) == 3 and argv[1] == "from-trs":
        from_trs(argv[2])
        return 0
    if len(argv) == 3 and argv[1] == "summary":
        return summary(argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
