"""Train a small MLP on MNIST, the recipe the lessons change step by step: train_single.py (one process) ->
train_ddp.py (DDP, lesson 05) -> train_fsdp.py (FSDP2, lesson 12)."""
import argparse
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import course_utils as cu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train-samples", type=int, default=60_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    dataset = TensorDataset(*cu.load_tensors("mnist", "train", subset=args.train_samples))
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        for step, (x, y) in enumerate(loader, start=1):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {step} steps, last loss {loss.item():.3f}")
    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
