#!/usr/bin/env python3
"""Tests of check_dependencies.py on small trees: it must flag what the layout forbids."""
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import check_dependencies  # noqa: E402
from fixture_tree import tree  # noqa: E402


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

    def test_server_subsystems_include_only_lower_layers(self):
        root = tree({
            "server/main.cc": '#include "server/api/a.h"\n#include "server/platform/b.h"\n',
            "server/api/a.cc": '#include "server/coordinator/c.h"\n#include "server/api/a.h"\n',
            "server/coordinator/c.cc": '#include "server/platform/b.h"\n',
        })
        self.assertEqual(check_dependencies.check(root), [])
        root = tree({
            "server/platform/b.cc": '#include "server/coordinator/c.h"\n',  # a layer above
            "server/coordinator/c.cc": '#include "server/gantry_server.h"\n',  # the folder above
            "server/gateway/g.cc": '#include "server/pools/p.h"\n',  # a sibling not allowed
            "server/misc/m.cc": '#include "server/platform/b.h"\n',  # not a subsystem
        })
        violations = check_dependencies.check(root)
        self.assertEqual(len(violations), 4, violations)
        self.assertTrue(any("server/platform/b.cc:1: server/platform/ may not include "
                            "server/coordinator/" in v for v in violations), violations)
        self.assertTrue(any("the folder above it" in v for v in violations))
        self.assertTrue(any("not a subsystem" in v for v in violations))

    def test_cpp_in_proto_fails(self):
        root = tree({"proto/gantry/base/x.h": "int x;\n"})
        self.assertEqual(len(check_dependencies.check(root)), 1)


if __name__ == "__main__":
    unittest.main()
