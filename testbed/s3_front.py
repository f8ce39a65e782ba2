"""A proxy in front of the tests' S3-compatible server: it counts requests by kind, checks credentials and
injects faults.

Every S3 request of a test (pyiceberg, pyarrow, Spark's S3A, the REST catalog's S3FileIO) goes through it, so

- the **request log** (one JSON object per request: kind GET/PUT/COPY/POST/LIST/DELETE/HEAD, bucket, key,
  range, status, bytes in and out, the access key id that signed it) is what the
  request-count benchmark reads;
- **credentials are checked**: with `--access-key` (and `--session-token`), a request signed by any other key
  (or none, or without the session token of temporary credentials) is refused with S3's 403 AccessDenied, so a
  test proves that the credentials the REST catalog vends reach every reader and writer
  (moto itself accepts any key);
- **faults** are injected on request: 503 SlowDown, latency, or a connection reset (the socket closed without
  a response), for requests of a kind and key, after some matching requests, a number of times.

Control and inspection go through paths no bucket can have (bucket names cannot start with `_`):
`GET /_front/log`, `POST /_front/reset`, `POST /_front/faults` (a JSON list of rules), `GET /_front/faults`.

Run: python testbed/s3_front.py --upstream http://127.0.0.1:PORT [--port 0] [--access-key KEY ...]
It prints `s3-front listening on 127.0.0.1:PORT` once it accepts connections.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_CHUNK = 1 << 20
_SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
              b"<Message>Please reduce your request rate.</Message></Error>")
_ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                  b"<Message>Access Denied</Message></Error>")


def request_kind(method: str, key: str, query: dict[str, list[str]], copy_source: str | None = None) -> str:
    """GET (an object's bytes), LIST, PUT, COPY (a PUT with a copy source: how S3 "renames"), POST, DELETE or
    HEAD, as an S3 bill counts them."""
    if method == "GET" and (not key or "list-type" in query or "uploads" in query):
        return "LIST"
    if method == "PUT" and copy_source:
        return "COPY"
    if method == "POST" and "delete" in query:
        return "DELETE"  # DeleteObjects: one request for up to 1,000 keys
    return method


class State:
    def __init__(self, access_keys: set[str], session_token: str | None = None) -> None:
        self.session_token = session_token
        self.lock = threading.Lock()
        self.log: list[dict] = []
        self.faults: list[dict] = []
        self.access_keys = access_keys

    def fault_for(self, kind: str, key: str) -> dict | None:
        with self.lock:
            for rule in self.faults:
                if rule.get("kind", "any") not in ("any", kind):
                    continue
                if rule.get("key_contains") and rule["key_contains"] not in key:
                    continue
                if rule.get("after", 0) > 0:
                    rule["after"] -= 1
                    continue
                if rule.get("times", 1) <= 0:
                    continue
                rule["times"] = rule.get("times", 1) - 1
                rule["fired"] = rule.get("fired", 0) + 1
                return dict(rule)
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle's algorithm each response would wait for the
    # client's delayed ACK (about 40 ms a request).
    disable_nagle_algorithm = True
    server: Front

    def log_message(self, format: str, *args: object) -> None:
        pass  # the JSON request log is the record

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, body: bytes, content_type: str = "application/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _admin(self, path: str, body: bytes) -> None:
        state = self.server.state
        if path == "/_front/log":
            with state.lock:
                text = json.dumps(state.log)
            self._reply(200, text.encode(), "application/json")
        elif path == "/_front/reset":
            with state.lock:
                state.log.clear()
                state.faults.clear()
            self._reply(200, b"{}", "application/json")
        elif path == "/_front/faults" and self.command == "POST":
            with state.lock:
                state.faults = json.loads(body or b"[]")
            self._reply(200, b"{}", "application/json")
        elif path == "/_front/faults":
            with state.lock:
                text = json.dumps(state.faults)
            self._reply(200, text.encode(), "application/json")
        else:
            self._reply(404, b"{}", "application/json")

    def _handle(self) -> None:
        body = self._body()
        split = urlsplit(self.path)
        if split.path.startswith("/_front/"):
            self._admin(split.path, body)
            return
        query = parse_qs(split.query, keep_blank_values=True)
        bucket, _, key = unquote(split.path).lstrip("/").partition("/")
        kind = request_kind(self.command, key, query, self.headers.get("x-amz-copy-source"))
        found = _CREDENTIAL.search(self.headers.get("Authorization", "")) or _CREDENTIAL.search(
            "Credential=" + "".join(query.get("X-Amz-Credential", [])))
        access_key = found.group(1) if found else None
        record = {"t": time.time(), "method": self.command, "kind": kind, "bucket": bucket, "key": key,
                  "range": self.headers.get("Range"), "bytes_in": len(body), "bytes_out": 0,
                  "access_key": access_key, "status": None, "fault": None}
        try:
            state = self.server.state
            token = self.headers.get("X-Amz-Security-Token") or "".join(query.get("X-Amz-Security-Token", []))
            if (state.access_keys and access_key not in state.access_keys) or (
                    state.session_token and token != state.session_token):
                record["status"] = 403
                self._reply(403, _ACCESS_DENIED)
                return
            rule = state.fault_for(kind, key)
            if rule is not None:
                record["fault"] = rule["action"]
                if rule["action"] == "503":
                    record["status"] = 503
                    self._reply(503, _SLOW_DOWN)
                    return
                if rule["action"] == "reset":
                    # An abortive close (RST), as a load balancer dropping the connection mid-request.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.close_connection = True
                    self.connection.close()
                    return
                if rule["action"] == "delay":
                    time.sleep(float(rule.get("seconds", 1.0)))
            self._forward(body, record)
        finally:
            with self.server.state.lock:
                self.server.state.log.append(record)

    def _forward(self, body: bytes, record: dict) -> None:
        conn = self.server.upstream_connection()
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("transfer-encoding", "connection")}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            self.server.drop_upstream_connection()
            raise
        record["status"] = resp.status
        self.send_response_only(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        payload = None
        if length is None and self.command != "HEAD":
            payload = resp.read()
            length = str(len(payload))
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                self.send_header(k, v)
        if length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command == "HEAD":
            resp.read()
            return
        if payload is not None:
            self.wfile.write(payload)
            record["bytes_out"] = len(payload)
            return
        while chunk := resp.read(_CHUNK):
            self.wfile.write(chunk)
            record["bytes_out"] += len(chunk)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class Front(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream: str, access_keys: set[str],
                 session_token: str | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        split = urlsplit(upstream)
        self.upstream = (split.hostname or "127.0.0.1", split.port or 80)
        self.state = State(access_keys, session_token)
        self._local = threading.local()

    def upstream_connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(*self.upstream, timeout=300)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def drop_upstream_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the S3-compatible server, http://127.0.0.1:PORT")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--access-key", action="append", default=[], help="the only access key ids accepted")
    parser.add_argument("--session-token", help="the session token every request must carry "
                                                "(temporary credentials)")
    args = parser.parse_args(argv)
    front = Front(args.port, args.upstream, set(args.access_key), args.session_token)
    print(f"s3-front listening on 127.0.0.1:{front.server_address[1]}", flush=True)
    try:
        front.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
