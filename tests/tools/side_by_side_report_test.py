#!/usr/bin/env python3
"""tools/side_by_side_report.py on made-up runs: one run's table and plot, and --merge of several runs
(later runs override earlier rows, a colon limits a run to some sets, each row names its runs)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "side_by_side_report.py")


def row(model, test, kv, peer):
    return {"model": model, "test": test, "kvserve": kv, "llamacpp": peer, "ratio": kv / peer}


def write_run(root, name, date, commit, files):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write(f"date: {date}\ncpu: Test CPU, 2 cores\nkvserve: commit {commit}\nllama.cpp: commit aaa\n"
                f"ik_llama.cpp: commit bbb\nthreads: 2, reps: 1, passes: 1\n")
    for fname, rows in files.items():
        with open(os.path.join(d, fname), "w") as f:
            json.dump(rows, f)
    return d


def table_row(report, model, test, section=0):
    """The cells of the first table row for (model, test) in the section-th table."""
    tables = report.split("| model | test |")[1:]
    for line in tables[section].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == [model, test]:
            return cells
    raise AssertionError(f"no row {model} {test} in table {section}")


class SideBySideReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = self.tmp.name
        self.old = write_run(root, "old", "2026-01-01 10:00 UTC", "1111111", {
            "base-llama.cpp.json": [row("S-Q8_0", "pp512", 300.0, 100.0), row("S-Q8_0", "tg128", 100.0, 100.0)],
            "base-ik.json": [row("S-Q8_0", "pp512", 300.0, 250.0)],
            "bf16-llama.cpp.json": [row("S-F16", "pp512", 50.0, 100.0)],
            "avx2-llama.cpp-avx2.json": [row("M-F16", "pp512", 90.0, 100.0)],
        })
        self.new = write_run(root, "new", "2026-01-02 10:00 UTC", "2222222", {
            "base-llama.cpp.json": [row("S-Q8_0", "tg128", 120.0, 100.0)],
            "pp4096-ik-rtr.json": [row("M-Q4_0", "pp4096", 200.0, 100.0)],
            "avx2-llama.cpp-avx2.json": [row("M-F16", "pp512", 101.0, 100.0)],
        })

    def tearDown(self):
        self.tmp.cleanup()

    def run_tool(self, *args):
        subprocess.run([sys.executable, TOOL, *args], check=True)

    def test_single_run(self):
        self.run_tool(self.old)
        report = open(os.path.join(self.old, "report.md")).read()
        self.assertIn("kvserve: commit 1111111", report)
        cells = table_row(report, "S-Q8_0", "tg128")
        self.assertEqual(cells[6], "1.00 ✗")  # below the 1.1x goal against llama.cpp
        self.assertEqual(len(cells), 8)  # no runs column for one run
        self.assertEqual(table_row(report, "S-Q8_0", "pp512")[6:8], ["3.00", "1.20"])
        ET.parse(os.path.join(self.old, "side_by_side.svg"))  # well-formed

    def test_merge_takes_the_latest_row_and_names_runs(self):
        out = os.path.join(self.tmp.name, "merged")
        self.run_tool(out, "--merge", self.old + ":base,avx2", self.new)
        report = open(os.path.join(out, "report.md")).read()
        self.assertIn("run 1: old (sets base,avx2), 2026-01-01 10:00 UTC, kvserve commit 1111111", report)
        self.assertIn("run 2: new, 2026-01-02 10:00 UTC, kvserve commit 2222222", report)
        # tg128 comes from run 2 (1.20, goal met); pp512 from run 1 only.
        self.assertEqual(table_row(report, "S-Q8_0", "tg128")[6], "1.20")
        self.assertEqual(table_row(report, "S-Q8_0", "tg128")[-1], "2")
        self.assertEqual(table_row(report, "S-Q8_0", "pp512")[-1], "1")
        self.assertEqual(table_row(report, "M-Q4_0", "pp4096")[7], "2.00")
        # The bf16 set of run 1 was left out by its colon.
        self.assertNotIn("S-F16", report)
        self.assertNotIn("--dtype bf16", report)
        # The AVX2 row of run 2 replaced run 1's (0.90 ✗ -> 1.01).
        avx2 = report.split("Forced AVX2")[1]
        self.assertIn("| M-F16 | pp512 | 101.0 | 100.0 | 1.01 | 2 |", avx2)
        svg = ET.parse(os.path.join(out, "side_by_side.svg")).getroot()
        labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("M-Q4_0 pp4096", labels)
        self.assertIn("M-F16 pp512 (AVX2)", labels)

    def test_merge_refuses_an_empty_run(self):
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        r = subprocess.run([sys.executable, TOOL, os.path.join(self.tmp.name, "m"), "--merge", self.old, empty],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no <set>-<peer>.json files in", r.stderr)


if __name__ == "__main__":
    unittest.main()
