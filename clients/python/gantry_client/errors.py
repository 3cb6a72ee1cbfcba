"""Typed exceptions for gRPC status codes, carrying the message and the google.rpc details the server
put in the `grpc-status-details-bin` trailer (BadRequest, ErrorInfo, RetryInfo, ...).

    try:
        client.generate("ele-25:3", energies=(10, 500), count=10)
    except gantry_client.InvalidArgument as error:
        print(error.message)
        for violation in error.field_violations:      # google.rpc.BadRequest, when the server sent one
            print(violation.field, violation.description)
"""

from __future__ import annotations

import datetime
from typing import Dict, List, Optional, Sequence, Type, TypeVar

import grpc
from google.protobuf import message as _message

from gantry_client.rpc import error_details_pb2, status_pb2

__all__ = [
    "GantryError", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
    "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
    "from_rpc_error", "error_for_code", "REQUEST_ID_KEY",
]

STATUS_DETAILS_KEY = "grpc-status-details-bin"
# The request id the client sends and the server returns (also in the server's log lines).
REQUEST_ID_KEY = "x-request-id"

# The detail types decoded from google.protobuf.Any by their type URL; others stay Any.
_DETAIL_TYPES: Dict[str, Type[_message.Message]] = {
    "google.rpc." + cls.__name__: cls
    for cls in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo,
                error_details_pb2.DebugInfo, error_details_pb2.QuotaFailure,
                error_details_pb2.PreconditionFailure, error_details_pb2.BadRequest,
                error_details_pb2.RequestInfo, error_details_pb2.ResourceInfo,
                error_details_pb2.Help, error_details_pb2.LocalizedMessage)
}

M = TypeVar("M", bound=_message.Message)


class GantryError(Exception):
    """A call failed: `code` (grpc.StatusCode), `message` (what the server said to change) and
    `details` (the decoded google.rpc detail messages; unknown types stay google.protobuf.Any)."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, details: Sequence[_message.Message] = (),
                 code: Optional[grpc.StatusCode] = None, request_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details: List[_message.Message] = list(details)
        # The call's x-request-id as the server returned it ("" when none came back).
        self.request_id = request_id
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        suffix = f" (request id {self.request_id})" if self.request_id else ""
        return f"{self.code.name}: {self.message}{suffix}"

    def detail(self, kind: Type[M]) -> Optional[M]:
        """The first detail of type `kind` (e.g. error_details_pb2.ErrorInfo), or None."""
        for d in self.details:
            if isinstance(d, kind):
                return d
        return None

    @property
    def field_violations(self) -> List[error_details_pb2.BadRequest.FieldViolation]:
        """Every google.rpc.BadRequest field violation (field path, description), in order."""
        return [v for d in self.details if isinstance(d, error_details_pb2.BadRequest)
                for v in d.field_violations]

    @property
    def error_info(self) -> Optional[error_details_pb2.ErrorInfo]:
        """The google.rpc.ErrorInfo (machine-readable reason, domain, metadata), if sent."""
        return self.detail(error_details_pb2.ErrorInfo)

    @property
    def reason(self) -> str:
        """ErrorInfo.reason, or "" when the server sent no ErrorInfo."""
        info = self.error_info
        return info.reason if info is not None else ""

    @property
    def retry_delay(self) -> Optional[datetime.timedelta]:
        """RetryInfo.retry_delay: how long to wait before retrying, if the server said."""
        info = self.detail(error_details_pb2.RetryInfo)
        return info.retry_delay.ToTimedelta() if info is not None else None


class Cancelled(GantryError):
    code = grpc.StatusCode.CANCELLED


class Unknown(GantryError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(GantryError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(GantryError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(GantryError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(GantryError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(GantryError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(GantryError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(GantryError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(GantryError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(GantryError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(GantryError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(GantryError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(GantryError):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(GantryError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(GantryError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[GantryError]] = {
    cls.code: cls for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
                              AlreadyExists, PermissionDenied, ResourceExhausted,
                              FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
                              Unavailable, DataLoss, Unauthenticated)
}


def error_for_code(code: grpc.StatusCode) -> Type[GantryError]:
    """The exception class of a status code (GantryError itself for OK or an unknown code)."""
    return _BY_CODE.get(code, GantryError)


def decode_status_details(blob: bytes) -> List[_message.Message]:
    """The details of a serialized google.rpc.Status; an undecodable blob gives no details."""
    try:
        status = status_pb2.Status.FromString(blob)
    except Exception:  # a malformed trailer must not hide the error it came with
        return []
    details: List[_message.Message] = []
    for any_detail in status.details:
        kind = _DETAIL_TYPES.get(any_detail.type_url.rsplit("/", 1)[-1])
        if kind is None:
            details.append(any_detail)
            continue
        decoded = kind()
        try:
            decoded.ParseFromString(any_detail.value)
        except Exception:
            details.append(any_detail)
            continue
        details.append(decoded)
    return details


def from_rpc_error(error: grpc.RpcError) -> GantryError:
    """The typed exception for a failed call (grpc.RpcError from a stub call or stream)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    details: List[_message.Message] = []
    request_id = ""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            details = decode_status_details(value)
        elif key == REQUEST_ID_KEY and isinstance(value, str) and len(value) <= 128:
            request_id = value
    exception = error_for_code(code)(message or "", details, code=code, request_id=request_id)
    exception.rpc_error = error  # type: ignore[attr-defined]
    return exception
