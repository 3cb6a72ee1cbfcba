#!/usr/bin/env python3
"""Tests of check_doc_links.py on small trees: it must flag links to missing files and headings."""
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import check_doc_links  # noqa: E402
from fixture_tree import tree  # noqa: E402


class CheckDocLinksTest(unittest.TestCase):
    def test_good_links_pass(self):
        root = tree({
            "README.md": "See [API](docs/API.md#status-codes) and [x](https://example.org/a#b).\n",
            "docs/API.md": "# API\n## Status codes\n### `gantry jobs` and more: TLS!\n"
                           "[self](#gantry-jobs-and-more-tls) [study](studies/s.md)\n"
                           "## Status codes\n[second](#status-codes-1)\n"
                           "```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n",
            "docs/studies/s.md": "# s\n",
        })
        self.assertEqual(check_doc_links.check(root), [])

    def test_missing_file_and_anchor_fail(self):
        root = tree({
            "README.md": "[gone](docs/GONE.md) [bad anchor](docs/API.md#no-such-part)\n",
            "docs/API.md": "# API\n[self](#api) [other](#nope)\n",
        })
        problems = check_doc_links.check(root)
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(any("README.md:1: docs/GONE.md: no such file" in p for p in problems))
        self.assertTrue(any("#no-such-part" in p for p in problems))
        self.assertTrue(any("docs/API.md:2: #nope" in p for p in problems))


if __name__ == "__main__":
    unittest.main()
