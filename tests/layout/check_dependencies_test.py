#!/usr/bin/env python3
"""Tests of check_dependencies.py on small trees: it must flag what the layout forbids."""
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import check_dependencies  # noqa: E402


def tree(files):
    root = pathlib.Path(tempfile.mkdtemp())
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


class CheckDependenciesTest(unittest.TestCase):
    def test_allowed_includes_pass(self):
        root = tree({
            "server/a.cc": '#include "storage/b.h"\n#include "showers/c.h"\n#include "gantry/v1/x.pb.h"\n'
                           '#include "grpcpp/grpcpp.h"\n#include <vector>\n',
            "workers/gan/t.cc": '#include <torch/torch.h>\n#include "showers/c.h"\n',
            "tests/any.cc": '#include "workers/gan/t.h"\n#include "server/a.h"\n',
        })
        self.assertEqual(check_dependencies.check(root), [])

    def test_server_including_workers_fails(self):
        root = tree({"server/a.cc": '#include "workers/runner/x.h"\n'})
        violations = check_dependencies.check(root)
        self.assertEqual(len(violations), 1)
        self.assertIn("server/a.cc:1", violations[0])
        self.assertIn("workers/", violations[0])

    def test_libraries_outside_their_folder_fail(self):
        root = tree({
            "clients/cli/a.cc": "#include <torch/torch.h>\n",
            "scheduler/s.cc": '#include "grpcpp/grpcpp.h"\n',
            "server/d.cc": "#include <pqxx/pqxx>\n",
            "workers/agent/w.cc": '#include "ATen/ATen.h"\n',
            "workers/x.cc": "#include <hdf5.h>\n",
        })
        self.assertEqual(len(check_dependencies.check(root)), 5)

    def test_cpp_in_proto_fails(self):
        root = tree({"proto/gantry/base/x.h": "int x;\n"})
        self.assertEqual(len(check_dependencies.check(root)), 1)


if __name__ == "__main__":
    unittest.main()
