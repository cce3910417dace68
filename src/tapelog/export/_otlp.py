"""Spans to the wire with the official OpenTelemetry SDK and OTLP exporter.

The optional ``otel`` extra (``pip install 'tapelog[otel]'``) brings
``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http``. They are
imported here, inside the functions, so ``import tapelog`` and the command
line never load them; without them :func:`require_otel` raises one line that
says how to install them.

The spans are made by the SDK's own ``Tracer`` (its attribute checks and
limits apply), with explicit start and end times from the log and ids that an
:class:`IdGenerator` hands out as :mod:`tapelog.export._model` planned them
(the SDK's public way to choose ids). A processor keeps the finished spans,
which then go, in batches, to ``OTLPSpanExporter.export`` (OTLP/HTTP,
protobuf) or through the same exporter's protobuf encoder to OTLP JSON.
"""

from __future__ import annotations

import base64
import importlib
import logging
import os
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from tapelog._errors import ExportError
from tapelog._version import __version__
from tapelog.export._model import OtelTrace
from tapelog.log import encode, redact

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "INSTALL_HINT",
    "otlp_json",
    "require_otel",
    "send_otlp",
    "traces_endpoint",
]

INSTALL_HINT: Final = "pip install 'tapelog[otel]'"
_BATCH_SPANS: Final = 512
_BATCH_BYTES: Final = 4 * 1024 * 1024
"""Spans per export request, and roughly how many bytes of attribute text (a
``--content`` export of a long session carries the whole history per span;
the exporter refuses requests over 64 MiB)."""
_CREDENTIALS_ENV: Final = "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"
_NEEDED: Final = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)
_ERRNO: Final = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


def require_otel() -> None:
    """Raise :class:`ExportError` naming the extra when the SDK or exporter is missing."""
    try:
        for module in _NEEDED:
            importlib.import_module(module)
    except ImportError:
        raise ExportError(
            "OpenTelemetry export needs the optional OpenTelemetry packages; "
            f"install them with: {INSTALL_HINT}"
        ) from None


def traces_endpoint(given: str | None) -> str | None:
    """The OTLP/HTTP traces URL: ``given``, else the standard environment variables.

    A URL without a path gets ``/v1/traces``, the OTLP/HTTP traces path (as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` does); one with a path is used as given
    (as ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is). ``None`` when nothing names one.
    """
    if given is None:
        exact = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        if exact:
            return _checked(exact)
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return _checked(base.rstrip("/") + "/v1/traces") if base else None
    url = _checked(given)
    if urllib.parse.urlsplit(url).path in ("", "/"):
        url = url.rstrip("/") + "/v1/traces"
    return url


def _checked(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ExportError(
            f"the OTLP endpoint {redact(url)!r} is not an http:// or https:// URL; "
            "give one like http://127.0.0.1:4318"
        )
    return url.strip()


def _resource(session_id: str) -> Any:
    """``service.name`` ``tapelog`` and ``service.instance.id`` the session id, unless
    the standard variables name them; so exporting a session twice gives the
    same bytes (the SDK's default instance id is a new random UUID per process)."""
    from opentelemetry.sdk.resources import Resource

    given = {
        item.partition("=")[0].strip()
        for item in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")
    }
    if os.environ.get("OTEL_SERVICE_NAME"):
        given.add("service.name")
    defaults = {"service.name": "tapelog", "service.instance.id": session_id}
    return Resource.create({k: v for k, v in defaults.items() if k not in given})


def sdk_spans(trace: OtelTrace) -> list[ReadableSpan]:
    """The trace's spans made by the SDK's tracer, with the planned ids and times."""
    from opentelemetry import trace as api
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    class Planned(IdGenerator):
        """Hands out the id planned for the span being started."""

        trace_id = 0
        span_id = 0

        def generate_span_id(self) -> int:
            return self.span_id

        def generate_trace_id(self) -> int:
            return self.trace_id

    class Keep(SpanProcessor):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def on_end(self, span: ReadableSpan) -> None:
            self.spans.append(span)

    ids, keep = Planned(), Keep()
    # Explicit sampler and ids: OTEL_TRACES_SAMPLER must not thin out an export.
    provider = TracerProvider(
        sampler=ALWAYS_ON,
        resource=_resource(trace.session_id),
        id_generator=ids,
        shutdown_on_exit=False,
    )
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("tapelog", __version__)
    sampled = api.TraceFlags(api.TraceFlags.SAMPLED)
    kinds = {"internal": api.SpanKind.INTERNAL, "client": api.SpanKind.CLIENT}
    for span in trace.spans:
        ids.trace_id, ids.span_id = span.trace_id, span.span_id
        context = Context()
        if span.parent_id is not None:
            parent = api.SpanContext(span.trace_id, span.parent_id, False, sampled)
            context = api.set_span_in_context(api.NonRecordingSpan(parent), context)
        links = [
            api.Link(api.SpanContext(t, s, True, sampled), {"tapelog.link": "fork-parent"})
            for t, s in span.links
        ]
        made = tracer.start_span(
            span.name,
            context=context,
            kind=kinds[span.kind],
            attributes=dict(span.attributes),
            links=links,
            start_time=span.start_ns,
            record_exception=False,
            set_status_on_exception=False,
        )
        for event in span.events:
            made.add_event(event.name, dict(event.attributes), timestamp=event.time_ns)
        if span.error is not None:
            made.set_status(api.Status(api.StatusCode.ERROR, span.error))
        made.end(end_time=span.end_ns)
    if len(keep.spans) != len(trace.spans):
        raise ExportError(
            f"the OpenTelemetry SDK recorded {len(keep.spans)} of {len(trace.spans)} spans; "
            "is OTEL_SDK_DISABLED set?"
        )
    return keep.spans


def _batches(spans: Sequence[ReadableSpan]) -> Iterator[list[ReadableSpan]]:
    batch: list[ReadableSpan] = []
    size = 0
    for span in spans:
        weight = 256 + sum(len(v) for v in (span.attributes or {}).values() if isinstance(v, str))
        if batch and (len(batch) >= _BATCH_SPANS or size + weight > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(span)
        size += weight
    if batch:
        yield batch


def send_otlp(trace: OtelTrace, endpoint: str, *, timeout: float = 10.0) -> int:
    """Send the trace to an OTLP/HTTP receiver; returns the number of spans sent.

    ``timeout`` (seconds) bounds each request with its retries. A failure is
    one :class:`ExportError` line naming the endpoint and the cause.
    """
    require_otel()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = sdk_spans(trace)
    watch = _Watching()
    # A session of the user's own (the exporter's credential-provider variable)
    # wins over ours; the error line then says less.
    own = not os.environ.get(_CREDENTIALS_ENV)
    exporter = OTLPSpanExporter(
        endpoint=endpoint, timeout=timeout, session=watch.session if own else None
    )
    sent = 0
    try:
        with _exporter_logs() as records:
            for batch in _batches(spans):
                if exporter.export(batch) is not SpanExportResult.SUCCESS:
                    partly = f" (after {sent} of {len(spans)} spans)" if sent else ""
                    raise ExportError(
                        f"could not export the spans to {redact(endpoint)}{partly}: "
                        f"{watch.failure(records)}; check that an OTLP/HTTP receiver "
                        "listens there"
                    )
                sent += len(batch)
    finally:
        with _exporter_logs():
            exporter.shutdown()  # type: ignore[no-untyped-call]
    return len(spans)


def otlp_json(trace: OtelTrace) -> bytes:
    """The trace as OTLP JSON lines: one ``ExportTraceServiceRequest`` per line.

    The protobuf messages are those the OTLP exporter sends (its own encoder),
    written in the OTLP JSON encoding: protobuf's JSON mapping with enums as
    integers and trace and span ids as hex (the OpenTelemetry Collector's file
    exporter writes, and its ``otlpjsonfile`` receiver reads, this format).
    """
    require_otel()
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    lines = []
    for batch in _batches(sdk_spans(trace)):
        request = MessageToDict(encode_spans(batch), use_integers_for_enums=True)
        lines.append(encode(_hex_ids(request)))
    return b"".join(line + b"\n" for line in lines)


_ID_KEYS: Final = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(value: Any) -> Any:
    """Protobuf's JSON writes bytes as base64; OTLP JSON writes ids as hex."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_KEYS else _hex_ids(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _exporter_logs() -> Iterator[list[logging.LogRecord]]:
    """Keep what the SDK and exporter log (retries, failures) for the one error line,
    instead of letting it reach stderr as tracebacks and warnings."""
    logger = logging.getLogger("opentelemetry")
    handler = _Records()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class _Watching:
    """A ``requests`` session (the exporter's public ``session`` option) that
    keeps the last answer or network error, for the one error line."""

    def __init__(self) -> None:
        import requests

        watch = self

        class Session(requests.Session):
            def send(self, request: Any, **kwargs: Any) -> Any:
                try:
                    response = super().send(request, **kwargs)
                except Exception as exc:
                    watch.outcome = exc
                    raise
                watch.outcome = f"{response.status_code} {response.reason or ''}".strip()
                return response

        self.outcome: BaseException | str | None = None
        self.session = Session()

    def failure(self, records: Sequence[logging.LogRecord]) -> str:
        """Why the exporter gave up: the receiver's status, or the network error."""
        outcome = self.outcome
        if isinstance(outcome, str):
            return redact(f"the receiver answered HTTP {outcome}")[:300]
        if outcome is not None:
            return _root_cause(outcome)
        if records:
            return redact(records[-1].getMessage())[:300]
        return "the exporter gave up without saying why"


def _root_cause(error: BaseException) -> str:
    """The operating system's words for a network error, e.g. ``Connection refused``."""
    seen: set[int] = set()
    queue: list[Any] = [error]
    while queue:
        current = queue.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return str(current.strerror)
        queue.extend(current.args)
        queue.extend((getattr(current, "reason", None), current.__cause__, current.__context__))
    found = _ERRNO.search(str(error))
    if found:
        return found.group(1).strip()
    return redact(f"{type(error).__name__}: {error}")[:300]
