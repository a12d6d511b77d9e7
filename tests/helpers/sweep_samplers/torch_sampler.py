"""A small torch policy sampler: on CUDA when available (so the sweep reports peak GPU
memory), on the CPU otherwise."""

from __future__ import annotations

import torch


class TorchSampler:
    def __init__(self, batch_size: int) -> None:
        self.batch_size = int(batch_size)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8)
        ).to(self.device)
        self.obs = torch.randn(self.batch_size, 64, device=self.device)

    @torch.no_grad()
    def sample(self) -> int:
        logits = self.net(self.obs)
        actions = torch.argmax(logits, dim=1)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return int(actions.shape[0])


def make_torch_sampler(batch_size: int) -> TorchSampler:
    return TorchSampler(batch_size)
