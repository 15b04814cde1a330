"""``rosetrain generate ... --push-to-hub OWNER/NAME``: a generated folder as a Hub dataset repo.

What is uploaded is what rosetrain made and finished, and its card: for every
finished split, its metadata files (and bridge files), its images and its
Parquet shards, plus ``README.md``. Never the shard parts and manifests
(``.parts/``), the lock or ownership files, temp files of a killed run, or
anything else a user keeps in the folder. The files are named by patterns
(``huggingface_hub.HfApi.upload_folder``'s ``allow_patterns``), a few per
split, so a folder of millions of images is matched in one pass.

Before any work (:func:`check_push`): the repo id must be ``OWNER/NAME``, the
Hub reachable (``HF_HUB_OFFLINE`` unset) and a token known (``HF_TOKEN`` or
``hf auth login``). Before the upload (:func:`push_folder`): every file the
manifests list is on disk, every gold record of the release files passes the
checks ``rosetrain score`` makes, and the card is there. After it: the
folder remembers the repo and commit of each split it pushed
(``rosetrain.data.hub.record_push``), so results and model cards made from
the local copy name the Hub dataset.

huggingface_hub only (no torch, no datasets).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError, first_line
from rosetrain.core.io import output_lock
from rosetrain.data.bridges import BRIDGE_FILE_TAGS, split_names
from rosetrain.data.card import CARD_NAME, finished_splits
from rosetrain.data.hub import record_push
from rosetrain.data.manifest import manifest_path, metadata_name, read_manifest
from rosetrain.data.release import load_split

OPTION = "--push-to-hub"


def check_push(repo_id: str) -> None:
    """A one-line error, before anything is generated, when the push cannot happen."""
    from huggingface_hub import constants, get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    owner, slash, name = repo_id.partition("/")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise RosetrainError(f"{OPTION}: {repo_id!r} is not a Hub repo id ({err})") from None
    if not (slash and owner and name):
        raise RosetrainError(
            f"{OPTION}: {repo_id!r}: expected OWNER/NAME (a user or organisation, then the name)"
        )
    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}
    if offline or constants.is_offline_mode():  # the environment now, or as huggingface_hub read it
        raise RosetrainError(
            f"{OPTION}: huggingface_hub is offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set), "
            "so nothing can be uploaded; unset it to push"
        )
    if not get_token():
        raise RosetrainError(
            f"{OPTION}: no Hugging Face token (set HF_TOKEN, or run `hf auth login`); nothing was generated"
        )


def upload_patterns(out_dir: Path) -> list[str]:
    """The ``allow_patterns`` that name the folder's finished splits' files and its card.
    Images are ``images/<subset>/<split>-<7+ digits>[-cue].png``: the seven digit
    classes keep split ``a`` from taking split ``a-2``'s images."""
    patterns = [CARD_NAME]
    for split in finished_splits(out_dir):
        digits = "[0-9]" * 7
        patterns += [metadata_name(split), f"images/*/{split}-{digits}*.png"]
        patterns += [f"metadata_{split}_{tag}.jsonl" for tag in BRIDGE_FILE_TAGS.values()]
        patterns += [f"hf/{name}/shard-*.parquet" for name in split_names(split, rose_layout=True).values()]
    return patterns


def check_folder(out_dir: Path) -> list[str]:
    """The splits to push; an error naming what is missing or wrong when the folder is not whole."""
    splits = finished_splits(out_dir)
    if not splits:
        raise RosetrainError(f"{out_dir}: no finished split to push (run rosetrain generate into it first)")
    if not (out_dir / CARD_NAME).is_file():
        raise RosetrainError(f"{out_dir}: no {CARD_NAME} (the dataset card) to push")
    for split in splits:
        manifest = read_manifest(manifest_path(out_dir, split), split) or {}
        for name in manifest.get("files") or ():
            if not (out_dir / name).is_file():
                raise RosetrainError(
                    f"{out_dir / name}: listed in split {split!r}'s manifest but missing; run the same "
                    f"generate command again to repair the split, then push"
                )
        if "release" in manifest.get("formats", ()):  # every gold record checked, as score reads it
            load_split(out_dir, split, bridges=True, fields=("item_id",), build=_nothing)
    return splits


def _nothing(record: Any, checked: Any) -> None:
    return None  # the checks are what counts; no record is kept


def _http_errors() -> tuple[type[BaseException], ...]:
    """The errors of the HTTP client huggingface_hub runs on (httpx2 in its 2.x,
    httpx before): a refused or unreachable endpoint raises one of them, not an OSError."""
    found: list[type[BaseException]] = []
    try:
        import httpx2

        found.append(httpx2.HTTPError)
    except ImportError:
        pass
    try:
        import httpx

        found.append(httpx.HTTPError)
    except ImportError:
        pass
    return tuple(found)


def push_folder(
    out_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
) -> dict[str, Any]:
    """Upload the folder's finished splits and card to the dataset repo ``repo_id``
    (created when missing; ``revision``: a branch, created from main when missing),
    holding the folder's lock so no generate changes it meanwhile."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    out_dir = Path(out_dir)
    with output_lock(out_dir, "this output folder"):
        splits = check_folder(out_dir)
        api = HfApi()
        try:
            api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            if revision is not None:
                api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
            commit = api.upload_folder(
                repo_id=repo_id,
                repo_type="dataset",
                folder_path=out_dir,
                revision=revision,
                allow_patterns=upload_patterns(out_dir),
                commit_message=f"rosetrain: splits {', '.join(splits)}",
            )
        except (HfHubHTTPError, OSError, ValueError, *_http_errors()) as err:  # type: ignore[misc]
            from huggingface_hub import constants

            raise RosetrainError(
                f"{OPTION} {repo_id}: the upload to {constants.ENDPOINT} failed: {first_line(err)}"
            ) from None
        record_push(out_dir, repo_id, revision, getattr(commit, "oid", None), splits)
    return {"repo": repo_id, "splits": splits, "url": str(getattr(commit, "commit_url", "") or "")}
