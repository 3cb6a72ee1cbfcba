"""Unit tests of gantry_client.errors: status codes to exception classes, and the google.rpc details
of the grpc-status-details-bin trailer decoded (a fake grpc.RpcError carries them)."""

import datetime
import unittest

import grpc

import gantry_client
from gantry_client import errors
from gantry_client.rpc import error_details_pb2, status_pb2


class _FakeRpcError(grpc.RpcError):
    def __init__(self, code, details, trailers=()):
        super().__init__()
        self._code, self._details, self._trailers = code, details, tuple(trailers)

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailers


def _status_blob(code, message, *details):
    status = status_pb2.Status(code=code, message=message)
    for d in details:
        status.details.add().Pack(d)
    return status.SerializeToString()


class ErrorsTest(unittest.TestCase):
    def test_codes_map_to_classes(self):
        for code, cls in [(grpc.StatusCode.NOT_FOUND, gantry_client.NotFound),
                          (grpc.StatusCode.INVALID_ARGUMENT, gantry_client.InvalidArgument),
                          (grpc.StatusCode.UNAVAILABLE, gantry_client.Unavailable),
                          (grpc.StatusCode.RESOURCE_EXHAUSTED, gantry_client.ResourceExhausted),
                          (grpc.StatusCode.UNAUTHENTICATED, gantry_client.Unauthenticated),
                          (grpc.StatusCode.FAILED_PRECONDITION, gantry_client.FailedPrecondition)]:
            error = errors.from_rpc_error(_FakeRpcError(code, "what to change"))
            self.assertIsInstance(error, cls)
            self.assertIsInstance(error, gantry_client.GantryError)
            self.assertEqual(error.code, code)
            self.assertEqual(error.message, "what to change")
            self.assertEqual(str(error), f"{code.name}: what to change")
            self.assertEqual(error.details, [])
            self.assertIsNone(error.error_info)
            self.assertEqual(error.field_violations, [])

    def test_details_decoded(self):
        bad = error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field="spec.world_size",
                                                        description="must be 1..256")])
        info = error_details_pb2.ErrorInfo(reason="WORLD_SIZE_OUT_OF_RANGE", domain="gantry",
                                           metadata={"max": "256"})
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(1500)
        blob = _status_blob(3, "spec.world_size: must be 1..256", bad, info, retry)
        error = errors.from_rpc_error(_FakeRpcError(
            grpc.StatusCode.INVALID_ARGUMENT, "spec.world_size: must be 1..256",
            [("other", "x"), (errors.STATUS_DETAILS_KEY, blob)]))
        self.assertIsInstance(error, gantry_client.InvalidArgument)
        self.assertEqual([(v.field, v.description) for v in error.field_violations],
                         [("spec.world_size", "must be 1..256")])
        self.assertEqual(error.reason, "WORLD_SIZE_OUT_OF_RANGE")
        self.assertEqual(error.error_info.metadata["max"], "256")
        self.assertEqual(error.retry_delay, datetime.timedelta(seconds=1.5))
        self.assertEqual(len(error.details), 3)

    def test_unknown_and_malformed_details(self):
        other = status_pb2.Status(code=5, message="nested")  # a type the client does not decode
        blob = _status_blob(5, "m", other)
        error = errors.from_rpc_error(_FakeRpcError(grpc.StatusCode.NOT_FOUND, "m",
                                                    [(errors.STATUS_DETAILS_KEY, blob)]))
        self.assertEqual(len(error.details), 1)
        self.assertTrue(error.details[0].type_url.endswith("/google.rpc.Status"))
        garbage = errors.from_rpc_error(_FakeRpcError(grpc.StatusCode.INTERNAL, "boom",
                                                      [(errors.STATUS_DETAILS_KEY, b"\xff\xff")]))
        self.assertIsInstance(garbage, gantry_client.Internal)
        self.assertEqual(garbage.details, [])
        self.assertEqual(garbage.message, "boom")

    def test_private_descriptor_pool(self):
        from google.protobuf import descriptor_pool
        with self.assertRaises(KeyError):
            descriptor_pool.Default().FindFileByName("google/rpc/status.proto")


if __name__ == "__main__":
    unittest.main()
