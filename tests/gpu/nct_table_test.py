#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nct_table.py (run_on_gpu.sh's summary table) on fixed nccl-tests logs: the logic of the GPU proof's table is
checked where no GPU runs it."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nct_table  # noqa: E402


def table(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = nct_table.main(list(args))
    return rc, out.getvalue().splitlines()


class NctTableTest(unittest.TestCase):
    def test_sizes_parse_as_nccl_tests_takes_them(self):
        self.assertEqual([nct_table.parse_size(s) for s in ("8", "64K", "16M", "1G", "64KB")],
                         [8, 65536, 16 << 20, 1 << 30, 65536])
        with self.assertRaises(ValueError):
            nct_table.parse_size("12x")

    def test_one_row_per_run_with_out_of_place_times_and_failures_marked(self):
        rc, lines = table("conflux 4 ranks=" + os.path.join(HERE, "fixtures", "nct_4ranks.log"),
                          "NVIDIA 1 rank=" + os.path.join(HERE, "fixtures", "nct_1rank.log"),
                          "skipped=" + os.path.join(HERE, "fixtures", "no_such.log"))
        self.assertEqual(rc, 0)
        self.assertEqual(lines[0], "| out-of-place time (us) | 8 B | 64 KiB | 16 MiB | 1 GiB |")
        self.assertEqual(lines[2], "| conflux 4 ranks | 100.61 | 153.00 | FAIL | - |")
        self.assertEqual(lines[3], "| NVIDIA 1 rank | 5.10 | 4.58 | 14.23 | 713.59 |")
        self.assertEqual(lines[4], "| skipped | - | - | - | - |")

    def test_rank_tagged_logs_give_rank_0s_rows(self):
        log = os.path.join(HERE, "fixtures", "nct_tagged.log")
        rc, lines = table("--sizes", "8,64K", "tagged=" + log)
        self.assertEqual(rc, 0)
        self.assertEqual(lines[2], "| tagged | 5.10 | 4.58 |")

    def test_ratios_against_a_reference_row(self):
        rc, lines = table("--sizes", "8,64K", "--ratio-to", "nvidia",
                          "ours=" + os.path.join(HERE, "fixtures", "nct_1rank.log"),
                          "nvidia=" + os.path.join(HERE, "fixtures", "nct_1rank.log"))
        self.assertEqual(rc, 0)
        self.assertIn("| ours / nvidia | 1.00x | 1.00x |", lines)


if __name__ == "__main__":
    unittest.main()
