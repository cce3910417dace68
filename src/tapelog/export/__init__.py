"""Sessions for other tools: OpenTelemetry traces (docs/otel.md).

:func:`otel_spans` maps a session log to spans that follow the OpenTelemetry
GenAI semantic conventions (a root span per session, one per turn, model
call and tool call), as plain data and without OpenTelemetry installed.
:func:`send_otlp` and :func:`otlp_json` put them on the wire with the
official SDK and OTLP exporter, the optional ``otel`` extra
(``pip install 'tapelog[otel]'``), imported only when they run.
"""

from tapelog._errors import ExportError
from tapelog.export._model import AttributeValue, OtelSpan, OtelTrace, SpanEvent
from tapelog.export._otlp import (
    INSTALL_HINT,
    otlp_json,
    require_otel,
    send_otlp,
    traces_endpoint,
)
from tapelog.export._spans import otel_spans

__all__ = [
    "INSTALL_HINT",
    "AttributeValue",
    "ExportError",
    "OtelSpan",
    "OtelTrace",
    "SpanEvent",
    "otel_spans",
    "otlp_json",
    "require_otel",
    "send_otlp",
    "traces_endpoint",
]
