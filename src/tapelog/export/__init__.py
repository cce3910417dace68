"""Sessions for other tools: OpenTelemetry traces (docs/otel.md).

:func:`otel_spans` maps a session log to spans that follow the OpenTelemetry
GenAI semantic conventions (a root span per session, one per turn, model
call and tool call), as plain data and without OpenTelemetry installed.
:func:`send_otlp` and :func:`otlp_json` put them on the wire with the
official SDK and OTLP exporter, the optional ``otel`` extra
(``pip install 'tapelog[otel]'``), imported only when they run.
"""

from tapelog._errors import ExportError
from tapelog.export._model import OtelSpan
from tapelog.export._otlp import otlp_json, send_otlp
from tapelog.export._spans import otel_spans

__all__ = [
    "ExportError",
    "OtelSpan",
    "otel_spans",
    "otlp_json",
    "send_otlp",
]
