"""The sequencer's etcd transactions through etcd's JSON gateway (``venue.etcd_api: json``).

The gateway (grpc-gateway, on the same client port as gRPC) takes ``/v3/kv/txn`` and
``/v3/kv/range`` as JSON with keys and values in base64, over ``_Http``: a minimal HTTP/1.1
client on one kept-alive connection (the standard library's costs four times the CPU). No
dependency beyond the standard library; the gRPC client (``node.etcd_grpc``) was measured
faster (docs/benchmarks.md).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from typing import Any

from rmptwin.errors import UserError
from rmptwin.node.etcd_client import Compare, EtcdCas, EtcdError, Op, Reply


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class _Http:
    """One kept-alive HTTP/1.1 connection, just enough for etcd's JSON gateway: a POST is one
    ``sendall`` of a prepared head and the body; the answer is read by Content-Length or
    chunks. A quarter of ``http.client``'s CPU per transaction (no header objects, no email
    parser), which on a 2-CPU machine is latency: the EVs' etcd clients run once per batch."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: ".encode()
        self._buf = b""

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.sock.sendall(b"POST %s HTTP/1.1\r\n%s%d\r\n\r\n%s" % (path.encode(), self._head, len(body), body))
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
        if "content-length" in fields:
            return status, self._exactly(int(fields["content-length"]))
        if fields.get("transfer-encoding", "").lower() != "chunked":
            raise http.client.HTTPException("etcd answer without a length")
        parts = []
        while (size := int(self._until(b"\r\n").split(b";")[0], 16)) > 0:
            parts.append(self._exactly(size))
            self._exactly(2)
        self._until(b"\r\n")   # the (empty) trailer
        return status, b"".join(parts)

    def _fill(self) -> None:
        got = self.sock.recv(65536)
        if not got:
            raise ConnectionError("etcd closed the connection")
        self._buf += got

    def _until(self, mark: bytes) -> bytes:
        while (i := self._buf.find(mark)) < 0:
            self._fill()
        out, self._buf = self._buf[:i], self._buf[i + len(mark):]
        return out

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        self.sock.close()


def _op(op: Op) -> dict[str, Any]:
    kind, key = op[0], _b64(op[1])
    if kind == "put":
        return {"request_put": {"key": key, "value": _b64(op[2])}}
    if kind == "range":
        r: dict[str, Any] = {"key": key}
        if op[2]:
            r["range_end"] = _b64(op[2])
        if op[3]:
            r["limit"] = str(op[3])
        if op[4]:
            r["serializable"] = True
        return {"request_range": r}
    return {"request_delete_range": {"key": key, "range_end": _b64(op[2])}}


def _compare(c: Compare) -> dict[str, str]:
    if c[0] == "absent":
        return {"key": _b64(c[1]), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
    return {"key": _b64(c[1]), "target": "VALUE", "result": "EQUAL", "value": _b64(c[2])}


def _values(kvs: list[dict[str, Any]]) -> list[bytes]:
    return [base64.b64decode(kv.get("value", "")) for kv in kvs]


class JsonEtcdCas(EtcdCas):
    api = "json"
    _transient = (OSError, http.client.HTTPException, EtcdError, ValueError, IndexError)

    def _open(self, host: str, port: int) -> _Http:
        return _Http(host, port, self.timeout_s)

    @staticmethod
    def _post(conn: _Http, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, raw = conn.post(path, json.dumps(body).encode())
        payload: dict[str, Any] = json.loads(raw or b"{}")
        if status == 400:   # a malformed request stays malformed on every member
            raise UserError(f"etcd refused a sequencer request: {payload.get('message', payload)}")
        if status != 200 or "error" in payload:
            raise EtcdError(payload.get("error") or payload.get("message") or f"HTTP {status}")
        return payload

    def _txn_on(self, conn: _Http, compare: list[Compare], success: list[Op], failure: list[Op]) -> Reply:
        body: dict[str, Any] = {"success": [_op(o) for o in success]}
        if compare:
            body["compare"] = [_compare(c) for c in compare]
        if failure:
            body["failure"] = [_op(o) for o in failure]
        r = self._post(conn, "/v3/kv/txn", body)
        return bool(r.get("succeeded")), [_values(x.get("response_range", {}).get("kvs", []))
                                          for x in r.get("responses", [])]

    def _range_on(self, conn: _Http, key: bytes, range_end: bytes) -> list[bytes]:
        return _values(self._post(conn, "/v3/kv/range", {"key": _b64(key), "range_end": _b64(range_end)}).get("kvs", []))
