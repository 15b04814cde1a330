"""TRL's ``GRPOTrainer``, with a streamed prompt's group kept whole when each
training process reads its own shards of the stream.

TRL cannot attach its repeat sampler to an ``IterableDataset``, so it repeats
the stream itself (``repeat_iterable_dataset``): each prompt of a generation
batch ``num_generations`` times in a row, then the whole batch again for each
further step the generation serves (those steps train on the batch's samples,
and the repeats they fetch are dropped). It sizes that batch for all the
processes together (``generation_batch_size``), as if every process read one
stream and kept its slice of each batch. But accelerate gives each process its
own shards of a ``datasets.IterableDataset`` that has at least one shard per
process (rosetrain's streams have 64), so each process repeats its own stream:
with two processes and two steps a generation, each drew the first half of
every batch twice (the second time as a repeat) and never the second half
(docs/experiments.md, round 25). Here the repeats are sized for the share of
one process, which is what it reads. Should TRL size them so itself, the
two-process test (``tests/test_train_distributed.py``) fails, and this class
can go.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer as TRLGRPOTrainer

from rosetrain.core.errors import RosetrainError


def reads_own_shards(
    dataset: Any, processes: int, split_batches: bool, dispatch_batches: bool | None
) -> bool:
    """Whether accelerate gives each of ``processes`` its own shards of ``dataset``
    (its rule for a ``datasets.IterableDataset`` with a shard per process whose
    batches are neither split nor dispatched from the first process)."""
    import datasets

    return (
        processes > 1
        and isinstance(dataset, datasets.IterableDataset)
        and not split_batches
        and dispatch_batches is False  # None: accelerate dispatches an iterable dataset's batches
        and dataset.n_shards >= processes
    )


def prompts_per_generation(args: Any, num_generations: int) -> int:
    """The prompts one process trains on per generation: its share of the
    generation batch (``per_device_train_batch_size`` rows a step, for
    ``steps_per_generation`` steps), in groups of ``num_generations``."""
    rows = args.per_device_train_batch_size * args.steps_per_generation
    if rows % num_generations:
        raise RosetrainError(
            f"per_device_train_batch_size x gradient_accumulation_steps ({rows}) must be a multiple of "
            f"grpo.num_generations ({num_generations}): each process samples whole groups of the "
            "prompts of its own shards of the stream",
            argument="grpo.num_generations",
        )
    return rows // num_generations


class GRPOTrainer(TRLGRPOTrainer):
    """TRL's trainer; a stream that each process reads its own shards of is
    repeated in batches of one process's share (see the module's docstring)."""

    def get_train_dataloader(self):
        accelerator, args = self.accelerator, self.args
        processes = accelerator.num_processes
        config = accelerator.dataloader_config
        if not reads_own_shards(self.train_dataset, processes, config.split_batches, config.dispatch_batches):
            return super().get_train_dataloader()
        share = prompts_per_generation(args, self.num_generations) * self.num_generations
        whole = args.generation_batch_size
        # TRL sizes the repeats by the generation batch, and reads it nowhere else
        # while it builds the dataloader: set to one process's share meanwhile
        args.generation_batch_size = share
        try:
            return super().get_train_dataloader()
        finally:
            args.generation_batch_size = whole
