"""``tabby-fixed serve`` (the default) and ``tabby-fixed probe``."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .config import ConfigError, add_config_arguments, load_config
from .probe import add_probe_arguments, run_probe
from .startup import prepare_process


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="tabby-fixed", description="TabbyAPI-compatible OpenAI server.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the server (the default)")
    add_config_arguments(serve)
    probe = commands.add_parser("probe", help="check any OpenAI-compatible server's tool-call arguments")
    add_probe_arguments(probe)
    if not argv or argv[0] not in ("serve", "probe", "-h", "--help"):
        argv.insert(0, "serve")
    options = parser.parse_args(argv)  # --help and unknown flags end here with argparse's own message
    if options.command == "probe":
        return run_probe(options)
    logging.basicConfig(level=os.environ.get("TABBY_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(argv[1:])
    except ConfigError as error:
        print(f"tabby-fixed: {error}", file=sys.stderr)
        return 2
    prepare_process(config)  # before torch is imported
    import uvicorn

    from .server.app import create_app

    uvicorn.run(create_app(config), host=config.network.host, port=config.network.port,
                log_level=os.environ.get("TABBY_LOG_LEVEL", "info").lower())
    return 0
