"""``tabby-fixed serve`` (the default), ``probe``, ``export-openapi`` and ``export-config``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from .config import ConfigError, add_config_arguments, load_config
from .probe import add_probe_arguments, run_probe


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="tabby-fixed", description="TabbyAPI-compatible OpenAI server.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the server (the default)")
    add_config_arguments(serve)
    probe = commands.add_parser("probe", help="check any OpenAI-compatible server's tool-call arguments")
    add_probe_arguments(probe)
    openapi = commands.add_parser("export-openapi", help="write the OpenAPI document of the server's routes")
    openapi.add_argument("--export-path", default="openapi.json", help="file to write (default: openapi.json)")
    openapi.add_argument("--api-servers", nargs="+", default=["OAI"], metavar="NAME",
                         help="API families to include: OAI, Kobold (default: OAI)")
    sample = commands.add_parser("export-config", help="write every config key with its default and description")
    sample.add_argument("--export-path", default="config_sample.yml",
                        help="file to write (default: config_sample.yml)")
    if not argv or argv[0] not in ("serve", "probe", "export-openapi", "export-config", "-h", "--help"):
        argv.insert(0, "serve")
    options = parser.parse_args(argv)  # --help and unknown flags end here with argparse's own message
    if options.command == "probe":
        return run_probe(options)
    if options.command in ("export-openapi", "export-config"):
        return _export(options)
    logging.basicConfig(level=os.environ.get("TABBY_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(argv[1:])
    except ConfigError as error:
        print(f"tabby-fixed: {error}", file=sys.stderr)
        return 2
    import uvicorn

    from .server.app import create_app

    uvicorn.run(create_app(config), host=config.network.host, port=config.network.port,
                log_level=os.environ.get("TABBY_LOG_LEVEL", "info").lower())
    return 0


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
