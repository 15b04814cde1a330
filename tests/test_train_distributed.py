"""Distributed training is distributed, or refused: two launched processes
without a GPU train as one job on the CPU process group (gloo), each on its
own share of the data; launched processes that would train separately are
refused; a second run on an output_dir in use is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError

ROOT = Path(__file__).resolve().parent.parent
# Trains through rosetrain's own trainer and records, per rank, the world size
# the trainer saw and a fingerprint of every row its data loader handed over.
RECORDING_RUN = """
import hashlib, json, sys
from pathlib import Path
from rosetrain.train import build as build_phase
from rosetrain.train import train
from rosetrain.train.recipe import load_recipe

seen = []
build = build_phase.build

def fingerprint(row):
    digest = hashlib.sha256(json.dumps([row["prompt"], row["completion"]], sort_keys=True).encode())
    for image in row["images"]:
        digest.update(image.tobytes())
    return digest.hexdigest()

def recording_build(checked):
    built = build(checked)
    collate = built.trainer.data_collator
    def recording(rows):
        seen.extend(fingerprint(row) for row in rows)
        return collate(rows)
    built.trainer.data_collator = recording
    recording_build.trainer = built.trainer
    return built

build_phase.build = recording_build
summary = train(load_recipe(sys.argv[1]))
args = recording_build.trainer.args
wrapped = recording_build.trainer.model_wrapped  # DDP's module: its gradients and buckets
Path(sys.argv[2], f"rank-{args.process_index}.json").write_text(
    json.dumps({"world_size": args.world_size, "rows": seen, "summary": summary,
                "bucket_view": getattr(wrapped, "gradient_as_bucket_view", None),
                "hooks": [hook.__name__ for hook, _ in getattr(wrapped, "_comm_hooks", [])],
                "gather": recording_build.trainer.accelerator.gather.__qualname__,
                "tokens": recording_build.trainer._total_train_tokens,
                "cores": sorted(__import__("os").sched_getaffinity(0))}))
"""


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory, train_split, tiny_train_spec) -> Path:
    return train_split(tmp_path_factory.mktemp("dist-data"), tiny_train_spec("t-dist"), scenes=4)


@pytest.fixture
def recipe(tmp_path, data_folder, tiny_model_dir) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "method": "sft",
                "model": str(tiny_model_dir),
                "output_dir": str(tmp_path / "run"),
                "data": {"folder": str(data_folder)},
                "max_steps": 2,
                "save_steps": 100,
                "per_device_train_batch_size": 2,
                "learning_rate": 1e-3,
                "lora": None,
                "cpu_threads": 1,
            }
        )
    )
    return path


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_rank(rank: int, world_size: int, port: int, script: list[str]) -> subprocess.Popen:
    """One process of a launch, with the environment torchrun gives each rank."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "WORLD_SIZE": str(world_size),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    return subprocess.Popen(
        [sys.executable, "-c", *script], env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def test_two_processes_without_a_gpu_train_as_one_job_on_disjoint_data(recipe, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the launch would use NCCL")
    port = free_port()
    procs = [launch_rank(rank, 2, port, [RECORDING_RUN, str(recipe), str(tmp_path)]) for rank in (0, 1)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{i}.json").read_text()) for i in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert all(r["rows"] for r in ranks)
    assert not set(ranks[0]["rows"]) & set(ranks[1]["rows"])  # each rank trains on its own rows
    assert ranks[0]["summary"]["world_size"] == 2 and ranks[0]["summary"]["is_main_process"]
    assert not ranks[1]["summary"]["is_main_process"]
    assert (tmp_path / "run" / "checkpoint-final" / "model.safetensors").is_file()
    # the gradients are views of DDP's all-reduce buckets (no copy in and out each step)
    assert [r["bucket_view"] for r in ranks] == [True, True]
    if sys.platform == "linux":  # and averaged through shared memory, not gloo's TCP
        assert [r["hooks"] for r in ranks] == [["average"], ["average"]]
        # and the step's single numbers gathered there too: TRL's token count, summed over both ranks
        assert all(r["gather"].startswith("SharedMemory.serve_gathers") for r in ranks)
    assert ranks[0]["tokens"] == ranks[1]["tokens"] > 0
    if len(os.sched_getaffinity(0)) >= 2 and len(os.sched_getaffinity(0)) % 2 == 0:
        assert not set(ranks[0]["cores"]) & set(ranks[1]["cores"])  # each rank on its own cores


# GRPO on the frontier's own samples, every prompt made live (an untrained model
# passes nothing): what TRL trains each rank on is then visible in frontier.jsonl
FRONTIER_RUN = """
import sys
from rosetrain.train import frontier, train
from rosetrain.train.recipe import load_recipe

frontier.FrontierFilter.passes = lambda self, rows, texts: [1] * len(rows)
train(load_recipe(sys.argv[1]))
"""


@pytest.mark.slow
def test_two_processes_run_grpo_on_the_whole_groups_of_their_own_shards(
    tmp_path, tiny_model_dir, tiny_train_spec
):
    """Each process reads its own shards of the stream, so TRL's prompt repeats are
    sized for one process's share: every prompt a process's filter kept is trained
    on once, with the very samples that kept it. Sized for both processes, each
    drew the first half of its batch twice (the second time sampled anew) and
    never trained on the other half."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the launch would use NCCL")
    (tmp_path / "spec.yaml").write_text(tiny_train_spec("t-dist-grpo"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "method": "grpo",
                "model": str(tiny_model_dir),
                "output_dir": str(tmp_path / "run"),
                "data": {"spec": str(tmp_path / "spec.yaml")},
                "max_steps": 2,
                "save_steps": 100,
                "per_device_train_batch_size": 2,
                "gradient_accumulation_steps": 2,  # two steps a generation: what was broken
                "learning_rate": 1e-5,
                "lora": None,
                "cpu_threads": 1,
                "grpo": {
                    "num_generations": 2,
                    "max_completion_length": 4,
                    "frontier": True,
                    "frontier_reuse": True,
                },
            }
        )
    )
    port = free_port()
    procs = [launch_rank(rank, 2, port, [FRONTIER_RUN, str(recipe)]) for rank in (0, 1)]
    errs = []
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        errs.append(err)
    # one plan line for the job, from the main process
    assert [err.count("rosetrain train grpo: ") for err in errs] == [1, 0]
    lines = [json.loads(line) for line in (tmp_path / "run" / "frontier.jsonl").read_text().splitlines()]
    for rank in (0, 1):
        groups = [line["groups"] for line in lines if "groups" in line and line["rank"] == rank]
        # 2 steps x 2 prompts a process (2 steps of 2 rows, groups of 2), each reused, none drawn again
        assert sum(g["reused"] for g in groups) == 4 and sum(g["resampled"] for g in groups) == 0, groups


def test_grpo_sizes_its_groups_for_one_processs_own_shards():
    from types import SimpleNamespace

    from datasets import IterableDataset

    from rosetrain.train.grpo import frontier_stream
    from rosetrain.train.grpo_trainer import prompts_per_generation, reads_own_shards

    def rows(shards):
        yield from ({"shard": shard} for shard in shards)

    stream = IterableDataset.from_generator(rows, gen_kwargs={"shards": list(range(4))})
    assert reads_own_shards(stream, 2, split_batches=False, dispatch_batches=False)
    assert not reads_own_shards(stream, 1, split_batches=False, dispatch_batches=False)
    assert not reads_own_shards(stream, 8, split_batches=False, dispatch_batches=False)  # one stream, sliced
    assert not reads_own_shards(stream, 2, split_batches=True, dispatch_batches=False)
    assert not reads_own_shards(stream, 2, split_batches=False, dispatch_batches=None)  # dispatched
    two_steps = SimpleNamespace(per_device_train_batch_size=8, steps_per_generation=2, world_size=8)
    assert prompts_per_generation(two_steps, 8) == 2
    with pytest.raises(RosetrainError, match=r"\(4\) must be a multiple of grpo.num_generations \(8\)"):
        prompts_per_generation(SimpleNamespace(per_device_train_batch_size=2, steps_per_generation=2), 8)
    # eight processes cannot each filter shards of their own of a four-shard stream
    recipe = SimpleNamespace(data=SimpleNamespace(folder=None))
    with pytest.raises(RosetrainError, match="8 training processes, more than the stream's 4 shards"):
        frontier_stream(recipe, stream, None, two_steps)


def test_launched_processes_that_would_train_apart_are_refused(monkeypatch):
    from types import SimpleNamespace

    from rosetrain.train.distributed import check_distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RosetrainError, match="WORLD_SIZE=2, but training would run as 1 process"):
        check_distributed(SimpleNamespace(world_size=1))
    check_distributed(SimpleNamespace(world_size=2))
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_distributed(SimpleNamespace(world_size=1))


def test_a_launch_that_cannot_form_a_group_fails_in_one_line(recipe, tmp_path, monkeypatch, capsys):
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert cli_main(["train", "sft", "--recipe", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert err.count("rosetrain train: error:") == 1 and "MASTER_ADDR" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_second_run_on_an_output_dir_in_use_is_refused(recipe, tmp_path, capsys):
    from rosetrain.core.io import output_lock

    with output_lock(tmp_path / "run"):  # another run is writing there
        assert cli_main(["train", "sft", "--recipe", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "another rosetrain process" in err and str(tmp_path / "run") in err
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []  # not even a lock file


def test_train_on_cores_runs_one_job_of_n_processes_with_the_batch_split(recipe, tmp_path):
    """What `rosetrain demo --cores 2` does for SFT: torchrun, gloo, the global batch kept."""
    from rosetrain.train.launch import split_batch, train_on_cores

    summary = train_on_cores(
        "sft", recipe, [f"per_device_train_batch_size={split_batch(2, 2)}"], 2, tmp_path / "run"
    )
    assert summary["world_size"] == 2 and summary["global_step"] == 2
    assert (tmp_path / "run" / "checkpoint-final" / "model.safetensors").is_file()


def test_a_cpu_group_does_not_search_for_unused_parameters(monkeypatch):
    """transformers' default made DDP walk the graph for unused parameters on every
    step and warn that it found none; a recipe's trl section can still ask for it."""
    from rosetrain.train.distributed import cpu_group_settings

    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cpu_group_settings(gpu=False)["ddp_find_unused_parameters"] is False
    assert cpu_group_settings(gpu=True) == {}
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert cpu_group_settings(gpu=False) == {}


def test_a_batch_that_does_not_split_over_the_cores_is_named():
    from rosetrain.train.launch import core_overrides, split_batch

    assert split_batch(16, 2) == 8
    # one thread and no DataLoader worker a process: a core each
    assert core_overrides(16, 2) == [
        "cpu_threads=1",
        "per_device_train_batch_size=8",
        "dataloader_num_workers=0",
    ]
    with pytest.raises(RosetrainError, match="batch of 16 rows does not split evenly over 3"):
        core_overrides(16, 3)


def test_a_failed_launch_says_a_rerun_resumes(recipe, tmp_path):
    from rosetrain.train.launch import train_on_cores

    with pytest.raises(RosetrainError, match="failed .exit 1.*rerun resumes"):
        train_on_cores("sft", recipe, ["max_steps=-5"], 2, tmp_path / "run")
