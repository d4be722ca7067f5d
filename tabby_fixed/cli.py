"""``tabby-fixed serve`` (the default), ``probe``, ``health``, ``download``, ``export-openapi`` and
``export-config``.

Start-up failures a user can fix (bad settings, a port in use, an unusable key file, a model that
cannot load) print one line and exit non-zero; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path

from .bundled import DEMO_MODEL, DEMO_MODELS_DIR
from .config import ConfigError, add_config_arguments, load_config
from .download import DownloadError, DownloadSpec, download
from .errors import ApiError
from .health import add_health_arguments, run_health
from .probe import add_probe_arguments, run_probe
from .startup import prepare_process

#: serve's own flags, which are not config keys.
_SERVE_ONLY = ("--demo", "--debug")
_COMMANDS = ("serve", "probe", "health", "download", "export-openapi", "export-config", "-h", "--help")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="tabby-fixed", description="TabbyAPI-compatible OpenAI server.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the server (the default)")
    serve.add_argument("--demo", action="store_true",
                       help=f"serve the bundled scripted model '{DEMO_MODEL}' (no GPU needed), from any folder")
    serve.add_argument("--debug", action="store_true", help="print the traceback of a start-up failure")
    add_config_arguments(serve)
    probe = commands.add_parser("probe", help="check any OpenAI-compatible server's tool-call arguments")
    add_probe_arguments(probe)
    health = commands.add_parser("health", help="exit 0 when the server here answers /health (for HEALTHCHECK)")
    add_health_arguments(health)
    openapi = commands.add_parser("export-openapi", help="write the OpenAPI document of the server's routes")
    openapi.add_argument("--export-path", default="openapi.json", help="file to write (default: openapi.json)")
    openapi.add_argument("--api-servers", nargs="+", default=["OAI"], metavar="NAME",
                         help="API families to include: OAI, Kobold (default: OAI)")
    sample = commands.add_parser("export-config", help="write every config key with its default and description")
    sample.add_argument("--export-path", default="config_sample.yml",
                        help="file to write (default: config_sample.yml)")
    fetch = commands.add_parser("download", help="download a Hugging Face repository into model_dir")
    add_download_arguments(fetch)
    add_config_arguments(fetch)
    if not argv or argv[0] not in _COMMANDS:
        argv.insert(0, "serve")
    options = parser.parse_args(argv)  # --help and unknown flags end here with argparse's own message
    if options.command == "probe":
        return run_probe(options)
    if options.command == "health":
        return run_health(options)
    if options.command in ("export-openapi", "export-config"):
        return _export(options)
    if options.command == "download":
        return _download(argv[1:])
    flags = [flag for flag in argv[1:] if flag not in _SERVE_ONLY]
    if options.demo:
        flags = ["--model-dir", str(DEMO_MODELS_DIR), "--model-name", DEMO_MODEL, *flags]
    return _serve(flags, options.debug)


def _serve(flags: list[str], debug: bool) -> int:
    level = os.environ.get("TABBY_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(flags)
    except ConfigError as error:
        return _failed(error, debug, 2)
    prepare_process(config)  # before torch is imported (the server's modules below may import it)
    # Imported here so that probe and health start without loading the server's web stack.
    from .server.prepare import StartupError
    from .server.startup import serve

    try:
        serve(config, log_level=level.lower())
    except (ConfigError, StartupError) as error:
        return _failed(error, debug, 2 if isinstance(error, ConfigError) else 1)
    except KeyboardInterrupt:
        return 130
    return 0


def _failed(error: Exception, debug: bool, code: int) -> int:
    """One line a user can act on; the traceback only with ``--debug``."""
    if debug:
        traceback.print_exception(error)
    print(f"tabby-fixed: {error}", file=sys.stderr)
    return code


def _export(options: argparse.Namespace) -> int:
    from .exports import openapi_document, sample_config

    try:
        text = (json.dumps(openapi_document(options.api_servers), indent=2) + "\n"
                if options.command == "export-openapi" else sample_config())
    except ValueError as error:  # an unknown API family
        print(f"tabby-fixed: {error}", file=sys.stderr)
        return 2
    Path(options.export_path).write_text(text, encoding="utf-8")
    print(f"wrote {options.export_path}")
    return 0


def add_download_arguments(parser: argparse.ArgumentParser) -> None:
    """Upstream's ``download`` arguments; the config flags (``--model-dir``, ``--config``) follow them."""
    parser.add_argument("repo_id", help="Hugging Face repository, e.g. turboderp/Qwen3-8B-exl3")
    parser.add_argument("--folder-name", help="folder to create in model_dir (default: the repository's name)")
    parser.add_argument("--revision", help="branch, tag or commit (default: main)")
    parser.add_argument("--token", help="Hugging Face access token, for private or gated repositories")
    parser.add_argument("--include", nargs="+", default=["*"], metavar="GLOB", help="files to take (default: all)")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="GLOB", help="files to leave out")
    parser.add_argument("--repo-type", choices=("model", "lora"), default="model",
                        help="lora: into lora_dir instead of model_dir")


def _download(argv: list[str]) -> int:
    own = argparse.ArgumentParser(add_help=False)
    add_download_arguments(own)
    options, rest = own.parse_known_args(argv)
    try:
        config = load_config(rest)
    except ConfigError as error:
        print(f"tabby-fixed: {error}", file=sys.stderr)
        return 2
    spec = DownloadSpec(repo_id=options.repo_id, repo_type=options.repo_type, folder_name=options.folder_name,
                        revision=options.revision, token=options.token, include=options.include,
                        exclude=options.exclude)

    def progress(path: str, done: int, size: int) -> None:
        if done == size:
            print(f"{path}: {size} bytes")

    try:
        folder = download(config, spec, progress)
    except (DownloadError, ApiError) as error:
        print(f"tabby-fixed: {getattr(error, 'message', error)}", file=sys.stderr)
        return 1
    print(f"downloaded {spec.repo_id} to {folder}")
    return 0
