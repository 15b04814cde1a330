"""A generator-backed ``datasets.IterableDataset`` whose shards interleave.

``IterableDataset.from_generator(gen, gen_kwargs={"shards": [...]})`` lets
``datasets`` give each dataloader worker (and, through
``datasets.distributed.split_dataset_by_node``, each rank) its own subset of
the shards, but it then calls ``gen`` once per shard, one shard after the
other. For an unlimited stream that means a consumer only ever sees its first
shard. :class:`InterleavedShards` keeps the same shard bookkeeping (splitting,
shuffling the shard list) and calls the generator once with all the shards the
consumer holds, so the generator can interleave them.

Imports ``datasets``: only the streaming path loads this module.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import datasets
from datasets.iterable_dataset import ExamplesIterable


class InterleavedShards(ExamplesIterable):
    """One call of ``generate_examples_fn(**kwargs)`` over every shard in ``kwargs``."""

    def __iter__(self):
        done = self._state_dict["shard_example_idx"] if self._state_dict else 0
        for key_example in itertools.islice(self.generate_examples_fn(**self.kwargs), done, None):
            if self._state_dict:
                self._state_dict["shard_example_idx"] += 1
            yield key_example

    # datasets' own methods return a plain ExamplesIterable; keep this class.
    def shuffle_data_sources(self, generator) -> InterleavedShards:
        return self._like(super().shuffle_data_sources(generator))

    def shard_data_sources(self, num_shards: int, index: int, contiguous=True) -> InterleavedShards:
        return self._like(super().shard_data_sources(num_shards, index, contiguous=contiguous))

    def reshard_data_sources(self) -> InterleavedShards:
        return self  # the shard count is fixed: rows never depend on how many consumers there are

    @classmethod
    def _like(cls, other: ExamplesIterable) -> InterleavedShards:
        return cls(other.generate_examples_fn, other.kwargs)


def _keyed(generator: Callable[..., Iterator[dict[str, Any]]], **kwargs) -> Iterator[tuple[str, dict]]:
    for number, row in enumerate(generator(**kwargs)):
        yield str(number), row


def interleaved_dataset(
    generator: Callable[..., Iterator[dict[str, Any]]],
    gen_kwargs: dict[str, Any],
    features: datasets.Features | None,
) -> datasets.IterableDataset:
    """Like ``IterableDataset.from_generator``, but ``generator`` gets all of a
    consumer's shards in one call. The shard list is the one list in
    ``gen_kwargs``; ``generator`` must be a module-level function (dataloader
    workers unpickle it)."""
    examples = InterleavedShards(functools.partial(_keyed, generator), gen_kwargs)
    return datasets.IterableDataset(examples, info=datasets.DatasetInfo(features=features))
