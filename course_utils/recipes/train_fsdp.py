"""Train a small MLP on MNIST, the recipe the lessons change step by step: train_single.py (one process) ->
train_ddp.py (DDP, lesson 05) -> train_fsdp.py (FSDP2, lesson 12)."""
import argparse
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import course_utils as cu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-samples", type=int, default=60_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")  # torchrun set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    rank = dist.get_rank()

    torch.manual_seed(0)  # the same weights on every rank: fully_shard broadcasts nothing
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    for layer in (model[1], model[3]):
        fully_shard(layer)  # a unit: its weights sharded, gathered for its forward and backward, then freed
    fully_shard(model)  # the root unit: whatever the layers left
    dataset = TensorDataset(*cu.load_tensors("mnist", "train", subset=args.train_samples))
    sampler = DistributedSampler(dataset)  # this rank's 1/N of the data, shuffled
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for step, (x, y) in enumerate(loader, start=1):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: {step} steps, last loss {loss.item():.3f}")
    whole = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:  # every rank gathered the shards above (a collective): one writes them
        torch.save(whole, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
