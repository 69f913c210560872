#!/usr/bin/env bash
# Regenerate src/rmptwin/node/etcdpb/kv_pb2.py (and its type stub kv_pb2.pyi) from kv.proto
# beside it, after a change to the proto. The generated files are checked in, so a machine that
# only runs the project needs no protoc; this script needs the network to the package index.
#
# protoc comes from grpcio-tools, installed into a throwaway venv (it is not in requirements.lock:
# it pulls a newer setuptools than the venv's own). Its version sets the protobuf "gencode"
# version written into kv_pb2.py, which protobuf's runtime checks at import (the runtime must be
# at least as new, same major): pyproject.toml's protobuf range starts there. The service stub is
# not generated: node/etcd_grpc.py names the two methods itself (no grpcio version check).
set -euo pipefail
cd "$(dirname "$0")/.."
GRPCIO_TOOLS=${GRPCIO_TOOLS:-grpcio-tools==1.81.1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "$GRPCIO_TOOLS" 2>&1 | { grep -v '^WARNING: Location' || true; }
OUT=src/rmptwin/node/etcdpb
# from src/, so the file registers in protobuf's descriptor pool as rmptwin/node/etcdpb/kv.proto, no bare kv.proto
"$WORK/venv/bin/python" -m grpc_tools.protoc -I src --python_out=src --pyi_out=src "$OUT/kv.proto"
echo "[gen-etcdpb] $OUT/kv_pb2.py from $("$WORK/venv/bin/python" -m grpc_tools.protoc --version) ($GRPCIO_TOOLS)"
