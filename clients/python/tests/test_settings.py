"""Unit tests of gantry_client.resolve_settings: arguments > environment > config file > default."""

import os
import tempfile
import unittest
from unittest import mock

from gantry_client import Client, FailedPrecondition, Settings, resolve_settings
from gantry_client.client import DEFAULT_SERVER, check_transport, is_loopback_target


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
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
                  encoding="utf-8") as f:
            f.write(text)
        return path

    def test_a_config_file_holding_a_token_must_be_private(self):
        path = self.write_config("server = file:1\ntoken = file-token\n")
        self.assertEqual(resolve_settings().token, "file-token")
        os.chmod(path, 0o644)
        with self.assertRaisesRegex(FailedPrecondition, "mode 0644.*chmod 600"):
            resolve_settings()
        self.write_config("server = file:1\n")  # no token: it may be shared
        self.assertEqual(resolve_settings().server, "file:1")

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

    def test_allow_plaintext(self):
        self.assertFalse(resolve_settings().allow_plaintext)
        self.write_config("allow_plaintext = true\n")
        self.assertTrue(resolve_settings().allow_plaintext)
        os.environ["GANTRY_ALLOW_PLAINTEXT"] = "0"
        self.assertFalse(resolve_settings().allow_plaintext)
        self.assertTrue(resolve_settings(allow_plaintext=True).allow_plaintext)
        os.environ["GANTRY_ALLOW_PLAINTEXT"] = "yes"
        with self.assertRaisesRegex(ValueError, "GANTRY_ALLOW_PLAINTEXT"):
            resolve_settings()


class TransportTest(unittest.TestCase):
    def test_loopback_targets(self):
        for target in ("127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "LOCALHOST",
                       "localhost.:5", "[::1]:50051", "::1", "dns:///localhost:50051",
                       "ipv4:127.0.0.1:5", "ipv6:[::1]:5", "unix:/run/gantry.sock",
                       "unix-abstract:gantry", "127.0.0.1"):
            self.assertTrue(is_loopback_target(target), target)
        for target in ("10.0.0.5:50051", "gantry.example.org:443", "128.0.0.1:1", "127.0.0.256:1",
                       "127.0.0.1.evil.example:1", "localhost.evil.example:1", "[2001:db8::1]:5",
                       "dns:///gantry:50051", "0.0.0.0:50051", "127.0.0:1", "", "[::1",
                       "127.00000.0.1:1", "127.٣.0.1:1"):
            self.assertFalse(is_loopback_target(target), target)

    def test_token_in_clear_to_another_host_is_refused(self):
        remote = Settings(server="10.0.0.5:50051", token="gnt_secret")
        with self.assertRaises(FailedPrecondition) as refused:
            Client(remote)
        self.assertIn("refusing to send the API token in clear to 10.0.0.5:50051",
                      str(refused.exception))
        self.assertNotIn("gnt_secret", str(refused.exception))
        for fine in (Settings(server="10.0.0.5:50051", token="t", allow_plaintext=True),
                     Settings(server="10.0.0.5:50051"),
                     Settings(server="127.0.0.1:50051", token="t")):
            check_transport(fine)  # no exception
            Client(fine).channel.close()


if __name__ == "__main__":
    unittest.main()
