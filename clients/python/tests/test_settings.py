"""Unit tests of gantry_client.resolve_settings: arguments > environment > config file > default."""

import os
import tempfile
import unittest
from unittest import mock

from gantry_client import resolve_settings
from gantry_client.client import DEFAULT_SERVER


class ResolveSettingsTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.TemporaryDirectory()
        self.env = {"HOME": self.home.name}
        patcher = mock.patch.dict(os.environ, self.env, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.addCleanup(self.home.cleanup)

    def write_config(self, text, path=None):
        path = path or os.path.join(self.home.name, ".config", "gantry", "config")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_default(self):
        settings = resolve_settings()
        self.assertEqual(settings.server, DEFAULT_SERVER)
        self.assertEqual(settings.token, "")

    def test_precedence(self):
        self.write_config("# c\nserver = file:1\ntoken = 'file-token'\nca_cert = /ca.pem\n")
        self.assertEqual(resolve_settings().server, "file:1")
        self.assertEqual(resolve_settings().token, "file-token")
        os.environ["GANTRY_TOKEN"] = "env-token"
        self.assertEqual(resolve_settings().token, "env-token")
        self.assertEqual(resolve_settings().ca_cert, "/ca.pem")
        self.assertEqual(resolve_settings(token="arg-token").token, "arg-token")
        self.assertEqual(resolve_settings(server="arg:3").server, "arg:3")

    def test_config_path_from_env_and_errors(self):
        path = self.write_config("server = other:2\n", os.path.join(self.home.name, "g.conf"))
        os.environ["GANTRY_CONFIG"] = path
        self.assertEqual(resolve_settings().server, "other:2")
        os.environ["GANTRY_CONFIG"] = os.path.join(self.home.name, "missing.conf")
        with self.assertRaises(FileNotFoundError):
            resolve_settings()
        bad = self.write_config("prot = x\n", os.path.join(self.home.name, "bad.conf"))
        with self.assertRaisesRegex(ValueError, "bad.conf:1: unknown key 'prot'"):
            resolve_settings(config=bad)


if __name__ == "__main__":
    unittest.main()
