"""A real OTLP/HTTP traces receiver on a loopback port, for the export tests.

It does what a collector's OTLP/HTTP receiver does with a protobuf request:
accepts ``POST /v1/traces`` (``application/x-protobuf``, gzip or not), keeps
the body, and answers with an empty ``ExportTraceServiceResponse``. The tests
decode the kept bodies with ``opentelemetry.proto``'s
``ExportTraceServiceRequest``: what arrived on the wire, not what the SDK held.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Received:
    path: str
    content_type: str
    body: bytes


@dataclass
class Receiver:
    url: str
    status: int = 200
    """What to answer (set e.g. 400 to test a refusing receiver)."""
    requests: list[Received] = field(default_factory=list)

    def spans(self) -> list[Span]:
        """Every span of every request received, decoded from the protobuf bodies."""
        out: list[Span] = []
        for request in self.requests:
            decoded = ExportTraceServiceRequest.FromString(request.body)
            for resource_spans in decoded.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    out.extend(scope_spans.spans)
        return out

    def resources(self) -> list[dict[str, str]]:
        found = []
        for request in self.requests:
            for rs in ExportTraceServiceRequest.FromString(request.body).resource_spans:
                found.append({a.key: a.value.string_value for a in rs.resource.attributes})
        return found


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 (a free port), stopped after the block."""
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            receiver.requests.append(
                Received(self.path, self.headers.get("Content-Type", ""), body)
            )
            if receiver.status != 200:
                self.send_error(receiver.status)
                return
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
