"""Positional encodings: attention alone is blind to word order (Vaswani et al., 2017, §3.5).

Self-attention treats its input as a set: permuting the tokens permutes the outputs the same way.
The Transformer therefore adds to each token embedding a vector that depends on the position only,
either a fixed sinusoid (the paper's choice) or a learned table (Gehring et al., 2017, used by BERT and
GPT); the paper reports "nearly identical results" for the two (Table 3, row E).
"""

from __future__ import annotations

import torch
from torch import nn


def _check_table_size(num_positions: int, d_model: int) -> None:
    if num_positions < 1:
        raise ValueError(f"num_positions must be at least 1, got {num_positions}")
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(f"d_model must be a positive even number (sin/cos pairs), got {d_model}")


def sinusoidal_encoding(num_positions: int, d_model: int) -> torch.Tensor:
    """The ``(num_positions, d_model)`` table of the paper's §3.5:

        PE(pos, 2i)   = sin(pos / 10000^{2i / d_model})
        PE(pos, 2i+1) = cos(pos / 10000^{2i / d_model})

    Each pair of dimensions (2i, 2i+1) is a point on a circle turning with wavelength
    2π·10000^{2i/d_model}, from 2π to 10000·2π. For any offset k, PE(pos+k) is a fixed rotation of
    PE(pos) in each pair, which is why the authors hoped relative positions would be easy to attend to.
    """
    _check_table_size(num_positions, d_model)
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, two_i / d_model)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Add the fixed sinusoid table to ``(batch, seq, d_model)`` embeddings, then dropout (§5.4).

    The table is a buffer, not a parameter: nothing about it is learned, and it is saved with the model.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self.pe, offset)
        return self.dropout(x + self.pe[offset : offset + x.size(1)])


class LearnedPositionalEncoding(nn.Module):
    """Add a learned vector per position (a ``(max_len, d_model)`` embedding table), then dropout.

    It cannot say anything about positions beyond ``max_len``, and positions seen rarely in training
    (the ends of long sentences) get poorly trained vectors; the sinusoid has neither problem.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.pe = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self.pe, offset)
        return self.dropout(x + self.pe[offset : offset + x.size(1)])


def _check_input(x: torch.Tensor, table: torch.Tensor, offset: int) -> None:
    max_len, d_model = table.shape
    if x.ndim != 3 or x.size(-1) != d_model:
        raise ValueError(f"expected (batch, seq, d_model={d_model}) embeddings, got shape {tuple(x.shape)}")
    if x.size(1) == 0:
        raise ValueError("the input has no positions (seq length 0)")
    if offset < 0 or offset + x.size(1) > max_len:
        raise ValueError(f"positions {offset}..{offset + x.size(1) - 1} exceed max_len={max_len}; "
                         f"build the encoding with a larger max_len")


def position_similarity(pe: torch.Tensor) -> torch.Tensor:
    """``(n, n)`` dot products PE(p)·PE(q) / (d_model/2): how alike two positions look to a dot product.

    For the sinusoid, sin·sin + cos·cos in each pair gives PE(p)·PE(q) = Σ_i cos((p − q) ω_i) with
    ω_i = 10000^{−2i/d_model}: it depends only on the offset p − q, equals 1 on the diagonal after the
    division, and falls off (not monotonically) with distance.
    """
    if pe.ndim != 2 or pe.size(1) % 2 != 0:
        raise ValueError(f"expected a (positions, even d_model) table, got shape {tuple(pe.shape)}")
    return pe @ pe.T / (pe.size(1) / 2)


