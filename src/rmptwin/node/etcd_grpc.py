"""The sequencer's etcd transactions through etcd's native gRPC API (``venue.etcd_api: grpc``).

``KV.Txn`` and ``KV.Range`` as protobuf over one HTTP/2 channel (grpcio) to one member.
The messages are ``node.etcdpb.kv_pb2``, generated from the minimal ``etcdpb/kv.proto``
(scripts/gen-etcdpb.sh); the two methods are named here rather than by a generated service
stub, which would tie the code to the grpcio release that generated it. Against the JSON
gateway it saves the gateway's own hop inside etcd (JSON to protobuf and a loopback gRPC call
per request) and the client's JSON and base64 work: docs/benchmarks.md has the two measured
side by side.

A gRPC channel must not cross a fork (grpcio's threads do not survive it): make one in the
process that uses it.
"""

from __future__ import annotations

import grpc

from rmptwin.errors import UserError
from rmptwin.node.etcd_client import Compare, EtcdCas, EtcdError, Op, Reply
from rmptwin.node.etcdpb import kv_pb2 as pb

_EQUAL = pb.Compare.CompareResult.EQUAL
_VALUE, _CREATE = pb.Compare.CompareTarget.VALUE, pb.Compare.CompareTarget.CREATE
# no proxy for loopback etcd (grpc honours http_proxy), and no retry of grpc's own: the client's
# failover decides where a refused request goes next
_OPTIONS = [("grpc.enable_http_proxy", 0), ("grpc.enable_retries", 0)]


class _Channel:
    """A channel to one member and its two calls."""

    def __init__(self, host: str, port: int) -> None:
        self.channel = grpc.insecure_channel(f"{host}:{port}", options=_OPTIONS)
        self.txn = self.channel.unary_unary("/etcdserverpb.KV/Txn", request_serializer=pb.TxnRequest.SerializeToString,
                                            response_deserializer=pb.TxnResponse.FromString)
        self.range = self.channel.unary_unary("/etcdserverpb.KV/Range",
                                              request_serializer=pb.RangeRequest.SerializeToString,
                                              response_deserializer=pb.RangeResponse.FromString)

    def close(self) -> None:
        self.channel.close()


def _op(op: Op) -> pb.RequestOp:
    kind = op[0]
    if kind == "put":
        return pb.RequestOp(request_put=pb.PutRequest(key=op[1], value=op[2]))
    if kind == "range":
        return pb.RequestOp(request_range=pb.RangeRequest(key=op[1], range_end=op[2], limit=op[3],
                                                          serializable=op[4]))
    return pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=op[1], range_end=op[2]))


def _compare(c: Compare) -> pb.Compare:
    if c[0] == "absent":   # create_revision = 0 is set explicitly: a oneof member is sent even when 0
        return pb.Compare(result=_EQUAL, target=_CREATE, key=c[1], create_revision=0)
    return pb.Compare(result=_EQUAL, target=_VALUE, key=c[1], value=c[2])


def _rpc_error(e: grpc.RpcError) -> Exception:
    """INVALID_ARGUMENT (a malformed request, refused by every member) for the user; anything
    else (UNAVAILABLE: the member is down or has no leader; DEADLINE_EXCEEDED: a timeout, the
    transaction applied or not) is the next member's to answer."""
    code = e.code() if isinstance(e, grpc.Call) else None
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return UserError(f"etcd refused a sequencer request: {e.details() if isinstance(e, grpc.Call) else e}")
    return EtcdError(f"{code.name if code else 'gRPC error'}: {e.details() if isinstance(e, grpc.Call) else e}")


class GrpcEtcdCas(EtcdCas):
    api = "grpc"

    def _open(self, host: str, port: int) -> _Channel:
        return _Channel(host, port)

    def _txn_on(self, conn: _Channel, compare: list[Compare], success: list[Op], failure: list[Op]) -> Reply:
        req = pb.TxnRequest(compare=[_compare(c) for c in compare], success=[_op(o) for o in success],
                            failure=[_op(o) for o in failure])
        try:
            r = conn.txn(req, timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise _rpc_error(e) from None
        return r.succeeded, [[kv.value for kv in x.response_range.kvs] if x.HasField("response_range") else []
                             for x in r.responses]

    def _range_on(self, conn: _Channel, key: bytes, range_end: bytes) -> list[bytes]:
        try:
            r = conn.range(pb.RangeRequest(key=key, range_end=range_end), timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise _rpc_error(e) from None
        return [kv.value for kv in r.kvs]
