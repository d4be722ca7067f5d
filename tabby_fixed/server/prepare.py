"""Setting up what the config asks for before the first request: the preset and the model.

A failure the user can fix is a ``StartupError`` with one line: what, where, and how to fix it.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from ..config import TabbyConfig
from ..errors import ApiError

logger = logging.getLogger(__name__)


class StartupError(Exception):
    """A start-up failure the user can fix; the message is one line that says how."""


def _model_dir_problem(config: TabbyConfig) -> str | None:
    folder = config.resolve(config.model.model_dir)
    if folder.is_dir():
        return None
    what = "is not a folder" if folder.exists() else "does not exist"
    return (f"model.model_dir {folder} {what}; create it and put model folders in it, or point model.model_dir "
            f"(--model-dir) at the folder that holds them")


async def prepare(app: FastAPI) -> None:
    """Select the configured preset and load the configured model, once.

    The command line awaits this before serving, so a bad model name is reported before the
    first request; a server started another way (the tests' ``live_server``) gets it from the
    lifespan. Raises StartupError when the configured model cannot be loaded.
    """
    if app.state.prepared:
        return
    app.state.prepared = True
    config: TabbyConfig = app.state.config
    if config.sampling.override_preset:
        try:
            app.state.models.select_preset(config.sampling.override_preset)
            logger.info("sampler preset: %s", config.sampling.override_preset)
        except ApiError as error:
            logger.warning("sampling.override_preset: %s", error.message)
    name = config.model.model_name
    problem = _model_dir_problem(config)
    if name and problem:
        raise StartupError(problem)
    if not name:
        logger.warning("No model loaded: set model.model_name in config.yml (or pass --model-name NAME), or load "
                       "one with POST /v1/model/load; until then model requests get 503")
        if problem:
            logger.warning("%s", problem)
        return
    try:
        await app.state.models.load(name)
    except ApiError as error:
        # The operator reads this, not an API client: name the folder searched (404 bodies do not).
        where = config.resolve(config.model.model_dir)
        raise StartupError(f"cannot load model.model_name {name!r} from {where}: {error.message}") from error
    except Exception as error:  # an engine failure (CUDA out of memory, a broken file): one line, --debug for more
        raise StartupError(f"loading model.model_name {name!r} failed: {type(error).__name__}: {error}") from error
