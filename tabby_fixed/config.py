"""Server settings: TabbyAPI's config.yml keys, read from files, the environment and flags.

A TabbyAPI user's config.yml must work here unchanged, so the sections, key names, defaults and
precedence are upstream's (reference/tabbyapi.md §2). From lowest to highest priority:

1. ``config.yml`` in the working directory, when it exists;
2. environment variables ``TABBY_<SECTION>_<KEY>``, e.g. ``TABBY_NETWORK_PORT=5001``; list and
   mapping keys take a YAML or JSON flow value, e.g. ``TABBY_MODEL_GPU_SPLIT='[20, 25]'``;
3. the file named by ``--config PATH``, when given;
4. command-line flags ``--<key-with-hyphens>`` without the section, e.g. ``--port 5001`` or
   ``--gpu-split 20 25``. A key name shared by two sections would be ``--<section>-<key>``.

Layers are deep-merged. A blank YAML key, or an empty environment or flag value, means "use the
default", not "set to None", so a sample file full of blank keys changes nothing. Legacy keys
upstream still migrates (``model.draft``, ``model.lora``, ``logging`` keys without ``log_``) are
read as their new names, with a warning; the file itself is never rewritten.

Deviations from upstream, each to remove a trap:

- Upstream takes ``--config PATH`` as the whole command-line layer and ignores every other flag
  given with it. Here the other flags still apply on top of that file.
- Upstream drops unknown keys silently. Here they are still ignored, but named in one warning,
  so a misspelt key is noticed. Invalid values raise ``ConfigError`` naming the key, where it
  came from and the problem.
- Relative paths (``model_dir``, ``lora_dir``, ...) are read from the working directory, as
  upstream does, unless only the ``--config`` file's folder has them (``TabbyConfig.resolve``),
  so a config kept next to its models also works from any other working directory.

Keys accepted for compatibility but without effect in this build are named, with the reason, in
one start-up warning (``unsupported.py``).

When a model loads, its settings are merged once more, with the model folder's
``tabby_config.yml`` on top (``load_settings``, §2.3).
"""

from __future__ import annotations

import argparse
import logging
import os
import types
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

log = logging.getLogger(__name__)

OVERLAY_FILE = "tabby_config.yml"


class ConfigError(ValueError):
    """A setting that cannot be used. The message names the key, where it came from and why."""


class _Section(BaseModel):
    # Unknown keys are reported and removed before validation, so one that reaches a model is a
    # programming error, not a user's typo.
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def _check_cache_mode(value: str) -> str:
    """Accept what ExLlamaV3 can build: FP16, the legacy Q8/Q6/Q4 names, or "k,v" bit widths."""
    if value.strip().upper() in ("FP16", "Q8", "Q6", "Q4"):
        return value.strip().upper()
    bits = [part.strip() for part in value.split(",")]
    if len(bits) == 2 and all(part.isdigit() and 2 <= int(part) <= 8 for part in bits):
        return f"{int(bits[0])},{int(bits[1])}"
    raise ValueError("must be FP16, Q8, Q6, Q4 or 'k,v' bits from 2 to 8, e.g. '8,6'")


CacheMode = Annotated[str, AfterValidator(_check_cache_mode)]


class NetworkConfig(_Section):
    host: str = Field("127.0.0.1", description="Address to listen on; 0.0.0.0 listens on every interface.")
    port: int = Field(5000, ge=0, le=65535, description="TCP port to listen on.")
    disable_auth: bool = Field(False, description="Serve every route without an API key. Only on a trusted network.")
    disable_fetch_requests: bool = Field(False, description="Refuse to fetch image URLs named in requests.")
    send_tracebacks: bool = Field(False, description="Put server tracebacks in error responses. For debugging.")
    api_servers: list[str] = Field(default_factory=lambda: ["OAI"], description="API families to serve: OAI, Kobold.")
    sse_ping_interval: float = Field(15, ge=0, description="Seconds between keep-alive comments on a quiet stream.")
    max_request_bytes: int = Field(
        33554432, gt=0, description="Largest request body accepted, in bytes; a larger one is refused with 413.")
    responses_store_size: int = Field(
        1000, ge=0, description="Responses kept for previous_response_id and GET /v1/responses/{id}; 0 keeps none.")
    responses_store_ttl: float = Field(
        3600, gt=0, description="Seconds a stored response is kept.")
    max_queued_steps: int = Field(
        256, gt=0, description="Generated tokens of one response held for a client that reads slower than the model "
                               "writes; beyond this its jobs are not read further until the client catches up.")
    max_json_depth: int = Field(
        100, gt=0, description="Deepest nesting of arrays and objects in a request body; deeper is refused with 400.")
    max_jobs_per_request: int = Field(
        64, gt=0, description="Most generations one request may start (prompts times n); more is refused with 400.")
    max_stop_strings: int = Field(
        64, ge=0, description="Most stop strings one request may give; more is refused with 400.")
    max_stop_string_chars: int = Field(
        1000, gt=0, description="Longest stop string a request may give, in characters; longer is refused with 400.")
    metrics_public: bool = Field(
        False, description="Serve GET /metrics without an API key (for a Prometheus scraper on a trusted network).")

    @field_validator("api_servers")
    @classmethod
    def _known_servers(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name.lower() not in ("oai", "kobold")]
        if unknown:
            raise ValueError(f"unknown API server {', '.join(unknown)}; choose from OAI, Kobold")
        return [name.upper() for name in value]


class LoggingConfig(_Section):
    log_prompt: bool = Field(False, description="Log each rendered prompt.")
    log_generation_params: bool = Field(False, description="Log each request's sampler settings.")
    log_requests: bool = Field(False, description="Log each request's method, path and body.")
    log_chat_completion_requests: bool = Field(
        False, description="Write each chat request and its rendered prompt under logs/debug/, keys redacted.")


class ServedModel(BaseModel):
    """One entry of ``model.models``: a folder in model_dir, with its own chat template and preset."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    prompt_template: str | None = None
    override_preset: str | None = None


class ModelConfig(_Section):
    model_dir: str = Field("models", description="Folder that holds the model folders.")
    models: list[ServedModel] = Field(
        default_factory=list, description="Model folders served side by side, each a name or {name, "
        "prompt_template, override_preset}: a request's model picks one, loaded on first use.")
    max_loaded_models: int = Field(
        1, ge=1, description="With models: how many stay loaded at once; the least recently used idle one "
        "makes room for another.")
    idle_unload_seconds: float = Field(
        0, ge=0, description="With models: unload a model nobody has used for this many seconds; 0 never.")
    inline_model_loading: bool = Field(
        False, description="Let a request's model field load that model when it is not the one loaded.")
    use_dummy_models: bool = Field(False, description="Also list dummy_model_names in /v1/models.")
    dummy_model_names: list[str] = Field(
        default_factory=lambda: ["gpt-3.5-turbo"], description="Names /v1/models lists when use_dummy_models is on.")
    model_name: str | None = Field(None, description="Model folder (inside model_dir) to load at startup.")
    use_as_default: list[str] = Field(
        default_factory=list, description="model and draft_model keys reused as defaults by API and inline loads.")
    backend: Literal["exllamav3"] | None = Field(None, description="Model backend; only exllamav3 exists.")
    engine: Literal["auto", "exllamav3", "scripted"] = Field(
        "auto", description="Engine to run: auto means scripted for a folder with scripted.yml, else exllamav3.")
    max_seq_len: int | None = Field(
        None, description="Context length; blank takes the model's own, -1 forces the model's own.")
    cache_size: int | None = Field(
        None, description="KV cache size in tokens, a multiple of 256; blank means max_seq_len.")
    cache_mode: CacheMode = Field(
        "FP16", description="KV cache precision: FP16, Q8, Q6, Q4 or 'k,v' bits such as '8,6'.")
    tensor_parallel: bool = Field(False, description="Split each layer across GPUs instead of splitting by layer.")
    tensor_parallel_backend: Literal["native", "nccl"] = Field(
        "native", description="Transport for tensor parallelism: native or nccl.")
    gpu_split_auto: bool = Field(True, description="Fill GPUs in order automatically when gpu_split is empty.")
    autosplit_reserve: list[float] = Field(
        default_factory=lambda: [96], description="Memory in MB kept free on each GPU by the automatic split.")
    gpu_split: list[float] = Field(
        default_factory=list, description="GB to use on each GPU; a non-empty list wins over gpu_split_auto and "
                                          "also applies under tensor parallelism.")
    cpu_moe_offload_layers: int = Field(0, ge=0, description="Number of MoE layers whose experts stay in system RAM.")
    rope_scale: float | None = Field(1.0, description="Linear RoPE scale. Accepted for compatibility, unused.")
    rope_alpha: float | Literal["auto"] | None = Field(
        None, description="NTK RoPE alpha. Accepted for compatibility, unused.")
    chunk_size: int = Field(2048, gt=0, description="Prompt tokens processed per forward pass.")
    output_chunking: bool = Field(
        True, description="Give a reply cache pages chunk_size tokens at a time instead of all at once.")
    max_batch_size: int | None = Field(
        None, gt=0, description="Most jobs run at once; blank means 128, or 4 for models with recurrent state.")
    prompt_template: str | None = Field(
        None, description="Chat template to use instead of the model's own (a name from templates/).")
    vision: bool = Field(False, description="Load the vision tower so requests may carry images.")
    template_vars_default: dict[str, Any] = Field(
        default_factory=dict, description="Chat template variables used when a request does not set them.")
    template_vars_force: dict[str, Any] = Field(
        default_factory=dict, description="Chat template variables that override a request's own.")
    force_enable_thinking: bool = Field(
        False, description="Deprecated: same as template_vars_force {enable_thinking: true}.")
    reasoning: bool = Field(False, description="Split the model's reasoning into reasoning_content.")
    reasoning_start_token: str = Field("<think>", description="Tag that opens reasoning.")
    reasoning_end_token: str = Field("</think>", description="Tag that closes reasoning.")
    start_in_reasoning: Literal["auto", "always", "never"] = Field(
        "auto", description="Whether output starts inside reasoning; auto reads the prompt's end.")
    tool_calls_in_reasoning: bool = Field(
        True, description="Parse tool calls the model opens before it closes its reasoning.")
    reasoning_budget_tokens: int | None = Field(
        None, description="Most reasoning tokens before the model is made to stop thinking; blank or negative: no cap.")
    reasoning_budget_message: str | None = Field(
        None, description="Text inserted when the reasoning budget runs out.")
    tool_format: str | None = Field(None, description="Tool-call format; blank detects it from the model.")
    harmony: bool | None = Field(
        None, description="Use the Harmony (gpt-oss) format (true), never (false); blank detects it.")
    muse_glimmer: bool | None = Field(
        None, description="Use the Muse Glimmer format (true), never (false); blank detects it.")

    @field_validator("models", mode="before")
    @classmethod
    def _names_are_entries(cls, value: Any) -> Any:
        """A plain folder name is an entry with nothing else set."""
        return [{"name": item} if isinstance(item, str) else item for item in value] if isinstance(value, list) \
            else value

    @field_validator("models")
    @classmethod
    def _each_once(cls, value: list[ServedModel]) -> list[ServedModel]:
        names = [entry.name for entry in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"each model may be listed once; {', '.join(twice)} is listed more than once")
        return value

    @field_validator("max_seq_len")
    @classmethod
    def _positive_or_model_length(cls, value: int | None) -> int | None:
        if value is not None and value != -1 and value <= 0:
            raise ValueError("must be positive, or -1 for the model's own length")
        return value

    @field_validator("cache_size")
    @classmethod
    def _whole_pages(cls, value: int | None) -> int | None:
        if value is not None and (value <= 0 or value % 256):
            raise ValueError("must be a positive multiple of 256")
        return value


class DraftModelConfig(_Section):
    draft_mode: Literal["model", "disabled", "mtp", "ngram"] = Field(
        "model", description="Speculative decoding: a draft model, the model's own MTP layers, n-grams, or off.")
    draft_model_dir: str = Field("models", description="Folder that holds the draft model folders.")
    draft_model_name: str | None = Field(None, description="Draft model folder (inside draft_model_dir).")
    draft_rope_scale: float | None = Field(1.0, description="Draft RoPE scale. Accepted for compatibility, unused.")
    draft_rope_alpha: float | None = Field(None, description="Draft RoPE alpha. Accepted for compatibility, unused.")
    draft_cache_mode: CacheMode = Field("FP16", description="Draft KV cache precision, as cache_mode.")
    draft_gpu_split: list[float] = Field(
        default_factory=list, description="GB to use on each GPU for the draft model.")
    draft_num_tokens: int | None = Field(None, gt=0, description="Tokens drafted per step; blank lets the engine pick.")
    dynamic_draft: bool = Field(False, description="Adjust the number of drafted tokens to the acceptance rate.")
    ngram_match_min: int = Field(2, ge=1, description="Shortest n-gram match that proposes a draft in ngram mode.")


class SamplingConfig(_Section):
    override_preset: str | None = Field(
        None, description="Sampler override preset (a file name in sampler_overrides/, without .yml).")
    model_card_defaults: bool = Field(
        True, description="Use the model's generation_config.json values for sampler fields a request leaves out.")


class DeveloperConfig(_Section):
    unsafe_launch: bool = Field(False, description="Skip the dependency check at startup.")
    disable_request_streaming: bool = Field(False, description="Answer stream=true requests without streaming.")
    realtime_process_priority: bool = Field(False, description="Raise the server process to realtime priority.")
    seqlog: bool = Field(False, description="Also send logs to a Seq server.")
    seqlog_server_url: str = Field("http://localhost:5341", description="URL of the Seq server.")
    seqlog_api_key: str | None = Field(None, description="API key for the Seq server.")


class MemoryConfig(_Section):
    sysmem_recurrent_cache: int = Field(
        4096, ge=0, description="System RAM in MB for cached recurrent state of recurrent models.")
    sysmem_kv_cache: int = Field(0, ge=0, description="System RAM in MB for a second-tier KV cache; 0 disables it.")
    cuda_malloc_async: bool = Field(True, description="Use CUDA's asynchronous allocator (cudaMallocAsync).")


class LoraEntry(BaseModel):
    name: str
    scaling: float = Field(1.0, ge=0)


class LoraConfig(_Section):
    lora_dir: str = Field("loras", description="Folder that holds the LoRA folders.")
    loras: list[LoraEntry] | None = Field(
        None, description="LoRAs to load at startup, each {name, scaling}. Loading them is a no-op on exllamav3.")


class EmbeddingsConfig(_Section):
    embedding_model_dir: str = Field("models", description="Folder that holds the embedding model folders.")
    embeddings_device: Literal["cpu", "auto", "cuda"] = Field(
        "cpu", description="Device for the embedding model: cpu, auto or cuda.")
    embedding_model_name: str | None = Field(None, description="Embedding model folder to load at startup.")


class TabbyConfig(_Section):
    """Every section, plus the working directory and the config file's folder, where relative paths are read."""

    network: NetworkConfig = Field(default_factory=NetworkConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    draft_model: DraftModelConfig = Field(default_factory=DraftModelConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    developer: DeveloperConfig = Field(default_factory=DeveloperConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    config_dir: Path = Field(default_factory=Path.cwd)
    work_dir: Path = Field(default_factory=Path.cwd)

    def resolve(self, path: str | Path) -> Path:
        """A configured path: from the working directory as upstream reads it, unless only the config
        file's folder has it, so a config kept next to its models works from anywhere."""
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            return candidate
        upstream, beside = self.work_dir / candidate, self.config_dir / candidate
        return beside if not upstream.exists() and beside.exists() else upstream


SECTIONS: dict[str, type[BaseModel]] = {
    name: field.annotation for name, field in TabbyConfig.model_fields.items() if name not in ("config_dir", "work_dir")
}
_OVERLAY_SECTIONS: dict[str, type[BaseModel]] = {"model": ModelConfig, "draft_model": DraftModelConfig,
                                                 "sampling": SamplingConfig}

_M = TypeVar("_M", bound=BaseModel)


# ---- reading values from one source --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    """One value from one source; merging keeps the source of each key to name it in errors."""

    section: str
    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class _Unknown:
    name: str
    source: str


def _kind(annotation: Any) -> Literal["bool", "list", "mapping", "scalar"]:
    """How a string from the environment or the command line is read for a field of this type."""
    union = get_origin(annotation) in (Union, types.UnionType)
    for option in get_args(annotation) if union else (annotation,):
        origin = get_origin(option) or option
        if origin is list:
            return "list"
        if origin is dict:
            return "mapping"
        if option is bool:
            return "bool"
    return "scalar"


def _has_model_items(annotation: Any) -> bool:
    """True for lists of mappings (lora.loras), whose items a flag can only give as YAML text."""
    union = get_origin(annotation) in (Union, types.UnionType)
    for option in get_args(annotation) if union else (annotation,):
        if get_origin(option) is list:
            item = get_args(option)[0]
            return isinstance(item, type) and issubclass(item, BaseModel)
    return False


def _parse_flow(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError(f"{source}: {text!r} is not a valid YAML or JSON value") from None


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None


def yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's several-line report as one line: where, and what is wrong."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{where}: {getattr(error, 'problem', None) or error}"


def _from_document(
    document: Any, source: str, sections: Mapping[str, type[BaseModel]]
) -> tuple[list[_Setting], list[_Unknown]]:
    """Settings from a parsed YAML file of sections; blank keys are dropped so they mean the default."""
    if document is None:
        return [], []
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: expected sections such as 'network:' at the top level, got {document!r}")
    settings: list[_Setting] = []
    unknown: list[_Unknown] = []
    for section, block in document.items():
        if section not in sections:
            unknown.append(_Unknown(str(section), source))
            continue
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ConfigError(f"{source}: section {section} must hold keys, got {block!r}")
        fields = sections[section].model_fields
        for key, value in block.items():
            if key not in fields:
                unknown.append(_Unknown(f"{section}.{key}", source))
            elif value is not None:
                settings.append(_Setting(section, key, value, source))
    return settings, unknown


def _from_environment(environ: Mapping[str, str]) -> tuple[list[_Setting], list[_Unknown]]:
    """Settings from TABBY_<SECTION>_<KEY>; other TABBY_ names (TABBY_LOG_LEVEL) belong elsewhere."""
    settings: list[_Setting] = []
    unknown: list[_Unknown] = []
    for name, raw in environ.items():
        for section, model in SECTIONS.items():
            prefix = f"TABBY_{section.upper()}_"
            if not name.startswith(prefix):
                continue
            key = name[len(prefix):].lower()
            source = f"env {name}"
            if key not in model.model_fields:
                unknown.append(_Unknown(name, "the environment"))
            elif raw != "":
                structured = _kind(model.model_fields[key].annotation) in ("list", "mapping")
                settings.append(_Setting(section, key, _parse_flow(raw, source) if structured else raw, source))
            break
    return settings, unknown


# ---- the command line ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    section: str
    key: str
    flag: str

    @property
    def dest(self) -> str:
        return f"{self.section}.{self.key}"


def _options(sections: Mapping[str, type[BaseModel]]) -> list[_Option]:
    """One flag per key, named after the key alone unless another section has a key of that name."""
    counts = Counter(key for model in sections.values() for key in model.model_fields)
    return [
        _Option(section, key, "--" + (key if counts[key] == 1 else f"{section}_{key}").replace("_", "-"))
        for section, model in sections.items()
        for key in model.model_fields
    ]


_OPTIONS = _options(SECTIONS)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and one flag per config key, so the CLI's ``serve`` and load_config agree.

    Flags default to "absent" (argparse.SUPPRESS), so only flags actually given override the
    file and the environment.
    """
    parser.add_argument(
        "--config", metavar="PATH", default=argparse.SUPPRESS,
        help="config file to read instead of ./config.yml; other flags still apply on top of it")
    groups: dict[str, Any] = {}
    for option in _OPTIONS:
        if option.section not in groups:
            groups[option.section] = parser.add_argument_group(f"{option.section} settings")
        field = SECTIONS[option.section].model_fields[option.key]
        default = field.get_default(call_default_factory=True)
        shown = "blank" if default is None else str(default).lower() if isinstance(default, bool) else default
        text = f"{field.description} (default: {shown})".replace("%", "%%")
        extra: dict[str, Any] = {"metavar": option.key.upper()}
        kind = _kind(field.annotation)
        if kind == "list":
            extra["nargs"] = "*"
        elif kind == "bool":
            extra = {"nargs": "?", "const": "true", "metavar": "true|false"}
        groups[option.section].add_argument(
            option.flag, dest=option.dest, default=argparse.SUPPRESS, help=text, **extra)


class _ArgumentParser(argparse.ArgumentParser):
    """Raises instead of exiting, so a bad flag surfaces as a ConfigError like any other bad setting."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"command line: {message}")


def _from_flags(flags: Mapping[str, Any]) -> list[_Setting]:
    settings = []
    for option in _OPTIONS:
        if option.dest not in flags:
            continue
        raw = flags[option.dest]
        source = f"flag {option.flag}"
        annotation = SECTIONS[option.section].model_fields[option.key].annotation
        if _kind(annotation) == "mapping":
            raw = _parse_flow(raw, source)
        elif _has_model_items(annotation):
            raw = [_parse_flow(item, source) for item in raw]
        if raw != "":
            settings.append(_Setting(option.section, option.key, raw, source))
    return settings


# ---- merging and validation ----------------------------------------------------------------------------------------


def _deep_merge(base: Any, top: Any) -> Any:
    if not (isinstance(base, dict) and isinstance(top, dict)):
        return top
    return {**base, **{key: _deep_merge(base.get(key), value) for key, value in top.items()}}


def _merge(settings: Iterable[_Setting]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Later settings win; returns the sections and, per "section.key", the source that set it."""
    merged: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for setting in settings:
        if setting.value is None:
            continue
        block = merged.setdefault(setting.section, {})
        block[setting.key] = _deep_merge(block.get(setting.key), setting.value)
        sources[f"{setting.section}.{setting.key}"] = setting.source
    return merged, sources


def _validate(model: type[_M], data: Mapping[str, Any], sources: Mapping[str, str], prefix: str = "") -> _M:
    """Validate, turning pydantic's report into one line per bad key that says where the value came from."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            path = [*([prefix] if prefix else []), *(str(part) for part in error["loc"])]
            source = sources.get(".".join(path[:2]), "defaults")
            lines.append(f"{'.'.join(path)} = {error['input']!r} (from {source}): {error['msg']}")
        raise ConfigError("invalid setting: " + "\n".join(lines)) from None


def _warn_unknown(unknown: Sequence[_Unknown]) -> None:
    """One line for all of them: a misspelt key should be noticed without flooding the log."""
    if not unknown:
        return
    by_source: dict[str, list[str]] = {}
    for entry in unknown:
        by_source.setdefault(entry.source, []).append(entry.name)
    groups = "; ".join(f"{', '.join(names)} (in {source})" for source, names in by_source.items())
    log.warning("ignoring unknown config keys: %s", groups)


def _unknown_defaults(config: TabbyConfig, sources: Mapping[str, str]) -> list[_Unknown]:
    """use_as_default names keys; one that names nothing would silently do nothing."""
    known = ModelConfig.model_fields.keys() | DraftModelConfig.model_fields.keys()
    source = sources.get("model.use_as_default", "defaults")
    return [_Unknown(f"model.use_as_default entry {name!r}", source)
            for name in config.model.use_as_default if name not in known]


def _read_config_file(path: Path | None) -> tuple[list[_Setting], list[_Unknown]]:
    if path is None:
        return [], []
    return _from_document(_migrate_legacy(_read_yaml(path), str(path)), str(path), SECTIONS)


def _migrate_legacy(document: Any, source: str) -> Any:
    """Read the layouts upstream still migrates: ``model.draft`` is the draft_model section,
    ``model.lora`` the lora section, and ``logging`` keys lacking ``log_`` get it. Upstream rewrites
    the user's file (keeping a .bak); here the file is left alone and one warning names the keys."""
    if not isinstance(document, dict) or not any(isinstance(document.get(s), dict) for s in ("model", "logging")):
        return document
    migrated = {section: dict(block) if isinstance(block, dict) else block for section, block in document.items()}
    moved: list[str] = []
    model = migrated.get("model")
    if isinstance(model, dict):
        for old, section in (("draft", "draft_model"), ("lora", "lora")):
            if isinstance(model.get(old), dict):
                migrated[section] = {**model.pop(old), **(migrated.get(section) or {})}
                moved.append(f"model.{old} -> {section}")
    logs = migrated.get("logging")
    if isinstance(logs, dict):
        for key in [key for key in logs if not str(key).startswith("log_")]:
            logs.setdefault(f"log_{key}", logs.pop(key))
            moved.append(f"logging.{key} -> logging.log_{key}")
    if moved:
        log.warning("%s: legacy config keys read as their new names: %s", source, ", ".join(moved))
    return migrated


def load_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> TabbyConfig:
    """Build the server's settings from the config file, the environment and ``argv`` (see the module docstring).

    ``argv`` holds only the flags after ``serve``; None means no flags (not sys.argv, which holds
    the subcommand). Raises ConfigError for anything that cannot be used.
    """
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    parser = _ArgumentParser(add_help=False, allow_abbrev=False)
    add_config_arguments(parser)
    flags = vars(parser.parse_args([] if argv is None else list(argv)))

    chosen = cwd / Path(flags["config"]).expanduser() if "config" in flags else None
    default = cwd / "config.yml"
    for path in (chosen, default):
        if path is not None and path.is_dir():
            raise ConfigError(f"{path} is a directory, not a config file (a container runtime makes one when the "
                              f"file to mount did not exist); remove it and create the file, or drop the mount")
    if chosen is not None and not chosen.is_file():
        raise ConfigError(f"flag --config: no such file: {chosen}")
    base = default if default.is_file() and (chosen is None or not chosen.samefile(default)) else None

    base_settings, unknown = _read_config_file(base)
    env_settings, env_unknown = _from_environment(environ)
    chosen_settings, chosen_unknown = _read_config_file(chosen)
    merged, sources = _merge([*base_settings, *env_settings, *chosen_settings, *_from_flags(flags)])
    config_dir = chosen.parent if chosen is not None else cwd
    config = _validate(TabbyConfig, {**merged, "config_dir": config_dir, "work_dir": cwd}, sources)
    unknown += chosen_unknown
    _warn_unknown([*unknown, *env_unknown, *_unknown_defaults(config, sources)])
    return config


# ---- per-model settings --------------------------------------------------------------------------------------------


def model_overlay(folder: Path) -> dict[str, dict[str, Any]]:
    """The ``model``, ``draft_model`` and ``sampling`` blocks of a model folder's tabby_config.yml,
    blank keys dropped.

    A model's author knows its settings best (tool format, reasoning tags), so these win over
    the server's config at load time. A folder without the file gives {}.
    """
    path = folder / OVERLAY_FILE
    if not path.is_file():
        return {}
    settings, unknown = _from_document(_read_yaml(path), str(path), _OVERLAY_SECTIONS)
    _warn_unknown(unknown)
    return _merge(settings)[0]


def load_settings(
    config: TabbyConfig, folder: Path, request: Mapping[str, Any] | None = None
) -> tuple[ModelConfig, DraftModelConfig]:
    """The settings a model in ``folder`` loads with (reference/tabbyapi.md §2.3).

    At startup (``request`` None) the config's model and draft_model sections apply in full. For
    an API or inline load only the keys named in ``model.use_as_default`` come from the config,
    then the request's non-None keys (its draft settings under ``request["draft_model"]``); a
    server that wants use_as_default to matter passes only the keys the client sent. Either way
    the folder's tabby_config.yml applies last. Keys a request may carry that are not settings
    (``skip_queue``) are the caller's and are ignored here.
    """
    own = {"model": config.model.model_dump(), "draft_model": config.draft_model.model_dump()}
    if request is None:
        chosen = [_Setting(section, key, value, "config")
                  for section, block in own.items() for key, value in block.items()]
    else:
        defaults = set(config.model.use_as_default)
        chosen = [_Setting(section, key, value, "config model.use_as_default")
                  for section, block in own.items() for key, value in block.items() if key in defaults]
        blocks = {"model": request, "draft_model": request.get("draft_model") or {}}
        chosen += [_Setting(section, key, value, "load request")
                   for section, block in blocks.items() for key, value in block.items()
                   if key in _OVERLAY_SECTIONS[section].model_fields]
    source = str(folder / OVERLAY_FILE)
    chosen += [_Setting(section, key, value, source)
               for section, block in model_overlay(folder).items() for key, value in block.items()]
    merged, sources = _merge(chosen)
    return (
        _validate(ModelConfig, merged.get("model", {}), sources, "model"),
        _validate(DraftModelConfig, merged.get("draft_model", {}), sources, "draft_model"),
    )
