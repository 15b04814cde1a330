"""A dataset on the Hugging Face Hub as a local folder: ``hf://datasets/OWNER/NAME``.

``--data`` and an eval suite's ``hub_dataset`` name a dataset repo (the ROSE
release is ``sysuwyh357/ROSE-v0.1``); ``huggingface_hub.snapshot_download``
turns it into the snapshot folder of the local Hub cache, downloading what is
missing. It honours ``HF_HUB_OFFLINE``, ``HF_HOME`` / ``HF_HUB_CACHE`` and an
existing cache, so one command works online and offline. The snapshot's files
are symlinks into the cache's ``blobs/``: ``rosetrain.data.paths`` accepts
links that stay inside the same repo's cache folder.

Only huggingface_hub (no torch) is imported, and only when a Hub name is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from rosetrain.core.errors import RosetrainError, first_line
from rosetrain.data.paths import confined_path

HF_SCHEME = "hf://"


def is_hub_uri(text: str | os.PathLike) -> bool:
    return isinstance(text, str) and text.startswith(HF_SCHEME)


def resolve_data(text: str | os.PathLike, what: str = "--data") -> Path:
    """The local path of ``text``: itself (``~`` expanded), or for
    ``hf://datasets/OWNER/NAME[@REVISION][/PATH]`` the snapshot folder of the
    local Hub cache (``PATH`` inside it), fetched when missing."""
    if not is_hub_uri(text):
        return Path(text).expanduser()
    from huggingface_hub import parse_hf_uri
    from huggingface_hub.errors import HfUriError

    try:
        uri = parse_hf_uri(str(text))
    except HfUriError as err:
        raise RosetrainError(
            f"{what}: {first_line(err)} (expected {HF_SCHEME}datasets/OWNER/NAME[@REVISION])"
        ) from None
    if uri.type != "dataset":
        raise RosetrainError(
            f"{what}: {text} names a {uri.type} repo; a dataset is {HF_SCHEME}datasets/{uri.id}"
        )
    snapshot = hub_snapshot(uri.id, uri.revision, what)
    if not uri.path_in_repo:
        return snapshot
    return confined_path(snapshot, uri.path_in_repo.rstrip("/"), f"{what}: {text}")


def data_identity(text: str | os.PathLike, split: str | None = None) -> dict[str, str | None]:
    """What a result says it was computed on: the data as given, and for
    ``hf://datasets/OWNER/NAME[@REVISION]`` the repo id and the commit of the
    local snapshot read (a branch name moves; the commit does not); likewise for
    a folder inside the Hub cache, and for a split of a folder that
    ``generate --push-to-hub`` pushed, as long as it is unchanged since."""
    found: dict[str, str | None] = {"data": str(text), "repo_id": None, "revision": None}
    if is_hub_uri(text):
        from huggingface_hub import parse_hf_uri

        uri = parse_hf_uri(str(text))  # resolve_data has parsed it already: it is valid
        found.update(repo_id=uri.id, revision=hub_snapshot(uri.id, uri.revision, "data").name)
    elif snapshot := cached_dataset(text) or pushed_dataset(text, split):
        found.update(repo_id=snapshot[0], revision=snapshot[1])
    return found


# the Hub cache's layout: <cache>/datasets--OWNER--NAME/snapshots/<commit>/... (a repo
# id never holds "--", so the folder name splits back into it)
_CACHED = re.compile(r"(?:^|/)datasets--([^/]+?)--([^/]+)/snapshots/([0-9a-f]{40})(?:/|$)")


def dataset_repo(text: str | os.PathLike | None, split: str | None = None) -> str | None:
    """The Hub dataset repo a folder as a user gives it names, without
    downloading anything: ``hf://datasets/OWNER/NAME[@REV][/PATH]``, a folder
    inside its snapshot in the local Hub cache, or a folder whose ``split`` was
    pushed there unchanged; else None."""
    if not text:
        return None
    if is_hub_uri(text):
        from huggingface_hub import parse_hf_uri

        return parse_hf_uri(str(text)).id  # a recipe's or command's check has parsed it: it is valid
    snapshot = cached_dataset(text) or pushed_dataset(text, split)
    return snapshot[0] if snapshot else None


def cached_dataset(path: str | os.PathLike) -> tuple[str, str] | None:
    """(repo id, commit) of a path inside a dataset's snapshot in the local Hub
    cache (what ``hf://datasets/...`` resolves to), else None."""
    found = _CACHED.search(Path(path).expanduser().absolute().as_posix())
    return (f"{found[1]}/{found[2]}", found[3]) if found else None


# what `generate --push-to-hub` left in the folder it pushed (rosetrain's own .parts/):
# the repo, branch and commit, and a digest of each split as it went up
PUSH_RECORD = ".parts/hub.json"


def split_digest(folder: Path, split: str) -> str:
    """sha256 over the split's manifest and main metadata file (either may be
    missing): a split regenerated or edited since the push digests otherwise."""
    from rosetrain.data.manifest import manifest_path, metadata_name

    digest = hashlib.sha256()
    for path in (manifest_path(folder, split), folder / metadata_name(split)):
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"-")
    return digest.hexdigest()


def record_push(
    folder: Path, repo_id: str, branch: str | None, commit: str | None, splits: list[str]
) -> None:
    """After a successful upload: the folder remembers where its splits went,
    so a run trained or evaluated on the local copy names the Hub dataset."""
    from rosetrain.core.io import atomic_write
    from rosetrain.core.jsonio import json_text

    digests = {split: split_digest(folder, split) for split in splits}
    record = {"repo_id": repo_id, "branch": branch or "main", "commit": commit, "splits": digests}
    atomic_write(folder / PUSH_RECORD, json_text(record))


def pushed_dataset(text: str | os.PathLike, split: str | None) -> tuple[str, str] | None:
    """(repo id, commit or branch) where ``generate --push-to-hub`` put this
    folder's ``split``, when the split is what went up (its digest unchanged); else None."""
    folder = Path(text).expanduser()
    if split is None or not (folder / PUSH_RECORD).is_file():
        return None
    try:
        record = json.loads((folder / PUSH_RECORD).read_text(encoding="utf-8"))
        repo_id, pushed = record["repo_id"], record["splits"][split]
    except (OSError, ValueError, KeyError, TypeError):  # a record we cannot read claims nothing
        return None
    if not isinstance(repo_id, str) or pushed != split_digest(folder, split):
        return None
    revision = record.get("commit") or record.get("branch") or "main"
    return repo_id, str(revision)


def resolve_split(text: str | os.PathLike, what: str = "data") -> Path:
    """The local path of a split as a user gives it (a release folder, a metadata
    ``.jsonl`` or ``hf://datasets/...``), which every command that reads a split
    runs once: one not there is refused naming ``text`` as written (pathlib
    would show ``hf://`` as ``hf:/``)."""
    path = resolve_data(text, what)
    if not path.exists():
        where = " in the dataset's snapshot" if is_hub_uri(text) else ""
        raise RosetrainError(f"{what} {text}: no such folder or metadata .jsonl file{where}", argument="data")
    return path


def hub_snapshot(repo_id: object, revision: object = None, what: str = "hub_dataset") -> Path:
    """The local snapshot folder of the dataset repo ``repo_id`` at ``revision``
    (default: main), downloaded into the Hub cache unless it is there already.
    Every failure is one line naming ``what``; offline with nothing cached it
    says how to get the data."""
    if not isinstance(repo_id, str) or not repo_id:
        raise RosetrainError(f"{what}: expected a Hub dataset id OWNER/NAME, got {repo_id!r:.200}")
    if revision is not None and (
        not isinstance(revision, str)
        or not revision
        or revision.startswith("/")
        or ".." in revision.split("/")
        or "\\" in revision
    ):  # a revision is a name (refs/pr/1 too), never a path out of the cache's refs/
        raise RosetrainError(f"{what}: revision must be a branch, tag or commit, got {revision!r:.200}")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f" (revision {revision})" if revision else ""
    fetch = f"hf download --repo-type dataset {repo_id}" + (f" --revision {revision}" if revision else "")
    try:
        snapshot = Path(snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision))
    except HFValidationError as err:
        raise RosetrainError(
            f"{what}: {repo_id!r:.200} is not a Hub dataset id ({first_line(err)})"
        ) from None
    except (LocalEntryNotFoundError, IncompleteSnapshotError):
        # offline (HF_HUB_OFFLINE, no network, the Hub down) and not (wholly) in the cache
        from huggingface_hub import constants

        raise RosetrainError(
            f"{what}: dataset {repo_id}{at} is not (completely) in the Hugging Face cache "
            f"{constants.HF_HUB_CACHE} and the Hub cannot be reached; on a connected machine run "
            f"`{fetch}` (same HF_HOME), or give the data as a local copy",
            argument="data",
        ) from None
    except GatedRepoError:
        raise RosetrainError(
            f"{what}: dataset {repo_id} is gated: accept its terms on the Hub and log in (`hf auth login`)"
        ) from None
    except RevisionNotFoundError:
        raise RosetrainError(f"{what}: dataset {repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise RosetrainError(
            f"{what}: no dataset {repo_id} on the Hub (or it is private: log in with `hf auth login`)"
        ) from None
    except OSError as err:  # a full disk, a cache folder we may not write, an HTTP error
        raise RosetrainError(f"{what}: cannot download dataset {repo_id}{at}: {first_line(err)}") from None
    return confined_snapshot(snapshot, repo_id, what)


SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


def confined_snapshot(snapshot: Path, repo_id: str, what: str) -> Path:
    """``snapshot`` when it is a real folder ``snapshots/<revision>`` of the repo's own
    cache folder. Offline, huggingface_hub builds the path from the text of
    ``refs/<revision>``: an edited refs file (``../../x``, an absolute path) or a
    snapshot folder that is a link would lend another folder the dataset's name.
    Every file read below it is then checked by :mod:`rosetrain.data.paths`."""
    from huggingface_hub import constants

    repo = Path(constants.HF_HUB_CACHE) / f"datasets--{repo_id.replace('/', '--')}"
    real = os.path.join(os.path.realpath(repo), "snapshots", snapshot.name)
    if (
        snapshot.parent != repo / "snapshots"
        or not SNAPSHOT_NAME.match(snapshot.name)
        or snapshot.name in (".", "..")
        or os.path.realpath(snapshot) != real
    ):
        raise RosetrainError(
            f"{what}: dataset {repo_id}: the Hub cache names {str(snapshot)[:200]} as its snapshot, "
            f"outside the repo's cache folder {repo} (an edited refs/ file, or a linked snapshot); "
            f"delete {repo} and download the dataset again"
        )
    return snapshot
