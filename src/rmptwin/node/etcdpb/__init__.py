"""etcd's KV messages for the gRPC sequencer client (``node.etcd_grpc``): kv.proto, a minimal
copy of etcd's own, and kv_pb2.py generated from it by scripts/gen-etcdpb.sh (checked in)."""
