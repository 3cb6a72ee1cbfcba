"""Unit tests of the requests Client.update_model and Client.models build (the stub is replaced by a
recorder; tests/python/client_e2e.py runs both against a real server)."""

import unittest

from gantry_client import Settings
from gantry_client.client import Client
from gantry_client.v1 import catalog_pb2, common_pb2


class RecordingCatalog:
    def __init__(self):
        self.requests = []

    def UpdateModel(self, request, timeout=None):
        self.requests.append(request)
        return catalog_pb2.ModelVersion(name="ele", version=1)

    def ListModels(self, request, timeout=None):
        self.requests.append(catalog_pb2.ListModelsRequest.FromString(request.SerializeToString()))
        return catalog_pb2.ListModelsResponse()


class CatalogRequestsTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(Settings(server="127.0.0.1:1", token="", ca_cert=""))
        self.addCleanup(self.client.close)
        self.catalog = RecordingCatalog()
        self.client.catalog = self.catalog

    def test_update_mask_names_only_the_arguments_given(self):
        self.client.update_model("ele:1", visibility="public", tags={})
        request = self.catalog.requests[-1]
        self.assertEqual(request.model, "ele:1")
        self.assertEqual(list(request.update_mask.paths), ["visibility", "tags"])
        self.assertEqual(request.model_version.visibility, common_pb2.VISIBILITY_PUBLIC)
        self.assertEqual(dict(request.model_version.tags), {})
        self.client.update_model("ele@champion", description="")
        request = self.catalog.requests[-1]
        self.assertEqual(list(request.update_mask.paths), ["description"])

    def test_update_without_fields_or_with_a_bad_visibility_is_refused_locally(self):
        with self.assertRaises(ValueError):
            self.client.update_model("ele:1")
        with self.assertRaises(ValueError):
            self.client.update_model("ele:1", visibility="secret")
        self.assertEqual(self.catalog.requests, [])

    def test_models_filters(self):
        self.client.models(dataset="ds-1", model_preset="tiny", particle="Gamma")
        request = self.catalog.requests[-1]
        self.assertEqual(request.dataset, "ds-1")
        self.assertEqual(request.model_preset, "tiny")
        self.assertEqual(request.particle, common_pb2.PARTICLE_PHOTON)
        self.client.models()
        self.assertEqual(self.catalog.requests[-1].particle, common_pb2.PARTICLE_UNSPECIFIED)
        with self.assertRaises(ValueError):
            self.client.models(particle="muon")


if __name__ == "__main__":
    unittest.main()
