"""``tabby-fixed serve`` (the default), ``tabby-fixed probe`` and ``tabby-fixed health``.

Start-up failures a user can fix (bad settings, a port in use, an unusable key file, a model that
cannot load) print one line and exit non-zero; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from .bundled import DEMO_MODEL, DEMO_MODELS_DIR
from .config import ConfigError, add_config_arguments, load_config
from .health import add_health_arguments, run_health
from .probe import add_probe_arguments, run_probe
from .startup import prepare_process

#: serve's own flags, which are not config keys.
_SERVE_ONLY = ("--demo", "--debug")
_COMMANDS = ("serve", "probe", "health", "-h", "--help")


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
    if not argv or argv[0] not in _COMMANDS:
        argv.insert(0, "serve")
    options = parser.parse_args(argv)  # --help and unknown flags end here with argparse's own message
    if options.command == "probe":
        return run_probe(options)
    if options.command == "health":
        return run_health(options)
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
