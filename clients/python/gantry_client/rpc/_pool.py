"""The private descriptor pool of gantry_client.rpc: google.protobuf.Any and Duration, then (on
import of status_pb2 / error_details_pb2) google/rpc/status.proto and error_details.proto."""

from google.protobuf import any_pb2, descriptor_pool, duration_pb2, message_factory

POOL = descriptor_pool.DescriptorPool()

_factory = message_factory.MessageFactory(POOL)
for _module in (any_pb2, duration_pb2):
    _file = POOL.AddSerializedFile(_module.DESCRIPTOR.serialized_pb)
    for _message_type in _file.message_types_by_name.values():
        # Registers the message class, so the generated modules can use Any and Duration fields.
        _factory.GetPrototype(_message_type)
