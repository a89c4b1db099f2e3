#!/usr/bin/env python3
"""scripts/bench-tables.py: the tables show a recorded run's figures with its CPU and date, name
the benches with no run, show one bench's runs alone for a page that quotes it, refuse a file that
is not a recorded run by name, and `record` wraps a bench's JSON with the CPU and date. Uses tests/docs/data/bench-rpc-fixture.json."""

import importlib.util
import json
import pathlib
import shutil
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE.parent.parent / "scripts" / "bench-tables.py"
spec = importlib.util.spec_from_file_location("bench_tables", SCRIPT)
bt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bt)


class BenchTablesTest(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir)

    def test_a_table_shows_the_figures_with_the_cpu_and_the_date(self):
        shutil.copy(HERE / "data" / "bench-rpc-fixture.json", self.dir)
        text = bt.render(self.dir)
        self.assertIn("### Runs of crosstune-bench-rpc", text)
        self.assertIn("2026-12-01T10:00:00Z", text)
        self.assertIn("Fixture CPU 9000 (family 25, model 17; 2 CPUs; avx2, fma, avx512f)", text)
        self.assertIn("| `rpc_over_raw_rtt` | 1.088 |", text)
        self.assertIn("| `targets_met.upload` | no |", text)
        # The headline figures come before the rest.
        self.assertLess(text.index("rpc_over_raw_rtt"), text.index("raw_tcp_rtt_us"))
        self.assertNotIn("`crosstune-bench-rpc`,", text.split("No recorded run yet:")[1])

    def test_no_data_names_every_bench_as_unrecorded(self):
        text = bt.render(self.dir / "absent")
        self.assertIn("No recorded run yet:", text)
        for bench in bt.BENCHES:
            self.assertIn(f"`{bench}`", text)
        self.assertNotIn("|", text)

    def test_one_bench_alone_for_a_page_that_quotes_it(self):
        shutil.copy(HERE / "data" / "bench-rpc-fixture.json", self.dir)
        text = bt.render(self.dir, "crosstune-bench-rpc")
        self.assertIn("| `rpc_over_raw_rtt` | 1.088 |", text)
        self.assertNotIn("No recorded run yet:", text)
        with self.assertRaisesRegex(bt.DataError, r"no recorded run of python_tune_split\.py"):
            bt.render(self.dir, "python_tune_split.py")

    def test_a_file_that_is_not_a_recorded_run_is_named(self):
        (self.dir / "bad.json").write_text(json.dumps({"bench": "x", "date": "d", "cpu": {}}))
        with self.assertRaisesRegex(bt.DataError, r"bad\.json: .*'result' is missing"):
            bt.render(self.dir)
        (self.dir / "bad.json").write_text("{not json")
        with self.assertRaisesRegex(bt.DataError, r"bad\.json: not a recorded run"):
            bt.render(self.dir)

    def test_record_wraps_the_bench_json_with_cpu_and_date(self):
        fake = self.dir / "fake_bench.py"
        fake.write_text('print("warming up")\nprint(\'{"speedup": 2.5}\')\n')
        path = bt.record([sys.executable, str(fake)], self.dir / "out")
        run = json.loads(path.read_text())
        self.assertEqual(run["bench"], "fake_bench.py")
        self.assertEqual(run["result"], {"speedup": 2.5})
        self.assertRegex(run["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertIn("model_name", run["cpu"])
        self.assertIn("| `speedup` | 2.5 |", bt.render(self.dir / "out"))

    def test_a_recorded_run_names_no_path_of_this_machine(self):
        root = pathlib.Path("/srv/checkout/crosstune")
        got = bt.without_machine_paths(
            {"cli": "/srv/checkout/crosstune/build/default/cli/crosstune",
             "space": ["/srv/checkout/crosstune/../shared/s.json.gz"], "other": "/usr/lib/x.so",
             "n": 3}, root)
        self.assertEqual(got, {"cli": "build/default/cli/crosstune", "space": ["../shared/s.json.gz"],
                               "other": "/usr/lib/x.so", "n": 3})


if __name__ == "__main__":
    unittest.main()
