"""Model references: a local model directory or a Hugging Face Hub id, resolved to a local directory.

A reference names a local folder when that folder exists; otherwise, when it has the shape of a Hub
id (``name`` or ``org/name``: letters, digits, ``-``, ``_``, ``.``), it is downloaded (or found in the
cache) with ``huggingface_hub.snapshot_download``, which honours the Hub cache (``HF_HOME`` /
``HF_HUB_CACHE``), ``HF_TOKEN``, ``HF_HUB_OFFLINE`` and ``HF_ENDPOINT``. The model is then served
under its id, never under the snapshot's commit hash (:func:`hub_id_of_cache_folder` also names a
cache snapshot folder given as a path).

Every failure is one :class:`~serve.errors.ModelLoadError` line that says what to do.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from steadyrank.serve.errors import ModelLoadError

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


@dataclass(frozen=True)
class ResolvedModel:
    """A reference made local: the folder to load, the id to serve it under (None = the folder
    decides, :func:`serve.runtime.inspection.model_id`) and the Hub commit (None for a local folder)."""

    path: Path
    hub_id: str | None
    commit: str | None


def is_hub_id(reference: str) -> bool:
    """``reference`` has the shape of a Hub model id (``org/name`` or ``name``; no ``..``)."""
    return bool(_HUB_ID.fullmatch(reference)) and ".." not in reference


def hub_id_of_cache_folder(path: Path) -> str | None:
    """``org/name`` of a Hub cache snapshot folder (``…/models--org--name/snapshots/<commit>``), else None."""
    parent = path.parent
    if parent.name != "snapshots" or not parent.parent.name.startswith("models--"):
        return None
    return parent.parent.name.removeprefix("models--").replace("--", "/")


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def download(hub_id: str, revision: str | None = None, *, local_files_only: bool = False) -> ResolvedModel:
    """The snapshot folder of ``hub_id`` at ``revision`` (a branch, tag or commit; None = main),
    downloaded into the Hub cache if missing. Raises :class:`ModelLoadError` saying what to do."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise ModelLoadError(f"{hub_id}: not a local folder, and huggingface_hub is not installed "
                             "(pip install 'steadyrank[server]')") from None
    at = f" at revision {revision!r}" if revision else ""
    try:
        folder = Path(snapshot_download(hub_id, revision=revision, local_files_only=local_files_only))
    except GatedRepoError:
        raise ModelLoadError(
            f"{hub_id}: a gated model on the Hub ({_endpoint()}): accept its terms on its page with your account, "
            "then set HF_TOKEN to a read token of that account") from None
    except RevisionNotFoundError:
        raise ModelLoadError(f"{hub_id}: no revision {revision!r} on the Hub ({_endpoint()})") from None
    except RepositoryNotFoundError:
        raise ModelLoadError(
            f"{hub_id}: not a local folder and no such model on the Hub ({_endpoint()}); check the id, "
            "or set HF_TOKEN if it is private") from None
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if (_offline() or local_files_only) else "the Hub is unreachable"
        raise ModelLoadError(
            f"{hub_id}: not a local folder and {why}, and the Hub cache holds no copy{at}: run "
            f"'hf download {hub_id} --local-dir DIR' (or 'steadyrank models pull {hub_id}') where the Hub "
            "is reachable and pass DIR") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = "HF_TOKEN is not accepted" if status in (401, 403) else "the Hub answered an error"
        raise ModelLoadError(f"{hub_id}: {hint} (HTTP {status} from {_endpoint()})") from None
    return ResolvedModel(path=folder, hub_id=hub_id, commit=folder.name)


def resolve(reference: str, revision: str | None = None) -> ResolvedModel:
    """A local folder as it is (a Hub cache snapshot folder keeps its Hub id), else a Hub id
    downloaded by :func:`download`; anything else is an error naming the folder that is missing."""
    local = Path(reference).expanduser()
    if local.is_dir():
        folder = local.resolve()
        cached_id = hub_id_of_cache_folder(folder)
        commit = folder.name if cached_id is not None else None
        if revision is not None and revision != commit:
            raise ModelLoadError(f"{reference}: a local folder has no revision {revision!r} (revision applies to Hub ids)")
        return ResolvedModel(path=folder, hub_id=cached_id, commit=commit)
    if not is_hub_id(reference):
        raise ModelLoadError(f"{reference}: no model directory there (and not a Hub id of the form org/name)")
    return download(reference, revision)


def cache_dir() -> str:
    """The Hub cache folder ``huggingface_hub`` uses (``HF_HUB_CACHE``, else ``HF_HOME``/hub)."""
    from huggingface_hub import constants

    return os.fspath(constants.HF_HUB_CACHE)
