"""Tiny deterministic torch models of Qwen-Omni's three stages (random weights, no downloads).

- `Thinker`: a byte-level causal LM (embedding, one GRU layer, a head) that decodes one token per
  step; sampling is a seeded Gumbel-max, so the same prompt and seed give the same text.
- `Talker`: maps each thinker token (with a GRU over the history) to `CODEBOOKS` codec codes.
- `Code2Wav`: turns frames of codec codes into 16 kHz PCM with two transposed convolutions.

Sized for 2 CPU cores: a batch of 256 requests steps in about a millisecond with one thread.
Importing this module imports torch; it never imports vLLM.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CODEBOOKS", "CODEBOOK_SIZE", "HOP", "SAMPLE_RATE", "VOCAB", "Code2Wav", "Talker", "Thinker", "detokenize"]

VOCAB = 256  # byte-level: a prompt's UTF-8 bytes are its token ids
CODEBOOKS = 4
CODEBOOK_SIZE = 1024
SAMPLE_RATE = 16_000
HOP = 320  # samples per codec frame (20 ms)

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
# Output tokens read as syllables, with a space before one in four: visible, pronounceable text.
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]


def detokenize(token: int) -> str:
    syllable = _SYLLABLES[token % len(_SYLLABLES)]
    return " " + syllable if token % 4 == 0 else syllable


def _gumbel(seeds: torch.Tensor, positions: torch.Tensor, width: int) -> torch.Tensor:
    """Deterministic per-(seed, position, token) Gumbel noise, computed for the whole batch at once."""
    grid = torch.arange(width, dtype=torch.float64)
    x = torch.sin(seeds[:, None] * 12.9898 + positions[:, None] * 78.233 + grid[None, :] * 37.719) * 43758.5453
    u = (x - torch.floor(x)).clamp(1e-6, 1 - 1e-6)
    return (-torch.log(-torch.log(u))).float()


class Thinker(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, VOCAB)

    def prefill(self, prompt: list[int]) -> tuple[torch.Tensor, int]:
        """The state after reading `prompt`, and its last token."""
        ids = torch.tensor(prompt, dtype=torch.long)[None]
        _, h = self.gru(self.embed(ids))
        return h[0, 0], prompt[-1]

    def decode(
        self,
        last: torch.Tensor,
        h: torch.Tensor,
        seeds: torch.Tensor,
        positions: torch.Tensor,
        temperature: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One token for each request of the batch; returns (tokens [B], new states [B, H])."""
        out, h2 = self.gru(self.embed(last)[:, None, :], h[None])
        logits = self.head(out[:, 0]) / temperature[:, None].clamp_min(1e-3)
        greedy = temperature <= 0
        noise = _gumbel(seeds, positions, VOCAB) * (~greedy)[:, None]
        return (logits + noise).argmax(-1), h2[0]


class Talker(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.heads = nn.Linear(hidden, CODEBOOKS * CODEBOOK_SIZE)

    def step(self, tokens: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Codes [B, CODEBOOKS] for one thinker token per request, and the new states."""
        h2 = self.cell(self.embed(tokens), h)
        codes = self.heads(h2).view(-1, CODEBOOKS, CODEBOOK_SIZE).argmax(-1)
        return codes, h2


class Code2Wav(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.embeds = nn.ModuleList(nn.Embedding(CODEBOOK_SIZE, dim) for _ in range(CODEBOOKS))
        self.up1 = nn.ConvTranspose1d(dim, dim, kernel_size=20, stride=20)  # x20
        self.up2 = nn.ConvTranspose1d(dim, 1, kernel_size=16, stride=16)  # x16 -> HOP = 320

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T, CODEBOOKS] -> waveform [B, T * HOP] in [-1, 1]."""
        x = sum(emb(codes[..., i]) for i, emb in enumerate(self.embeds))
        assert isinstance(x, torch.Tensor)
        y = self.up2(torch.tanh(self.up1(x.transpose(1, 2))))
        return torch.tanh(y[:, 0]) * 0.5
