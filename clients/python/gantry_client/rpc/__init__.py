"""google.rpc.Status and its standard details (status_pb2, error_details_pb2), generated at build time
from clients/python/protos into a descriptor pool of their own (_pool), so they load next to any other
copy of google.rpc (googleapis-common-protos) without a clash."""
