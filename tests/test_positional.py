"""Positional encodings against the paper's formula (§3.5)."""

import math

import pytest
import torch

from lmlib.models.positional import (LearnedPositionalEncoding, SinusoidalPositionalEncoding, position_similarity,
                              sinusoidal_encoding)


def test_sinusoid_matches_formula_entry_by_entry():
    d = 10
    pe = sinusoidal_encoding(20, d)
    for pos in range(20):
        for i in range(d // 2):
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / d)), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / d)), abs=1e-6)


def test_similarity_depends_only_on_offset():
    sim = position_similarity(sinusoidal_encoding(30, 16))
    torch.testing.assert_close(sim.diagonal(), torch.ones(30))
    for k in range(1, 5):
        off = sim.diagonal(k)
        torch.testing.assert_close(off, off[0].expand_as(off), atol=1e-5, rtol=0)


def test_modules_add_the_table():
    x = torch.randn(2, 5, 8)
    sin = SinusoidalPositionalEncoding(8, max_len=16)
    torch.testing.assert_close(sin(x), x + sinusoidal_encoding(5, 8))
    torch.testing.assert_close(sin(x, offset=3), x + sinusoidal_encoding(8, 8)[3:])
    learned = LearnedPositionalEncoding(8, max_len=16)
    torch.testing.assert_close(learned(x), x + learned.pe[:5])
    assert sum(p.numel() for p in sin.parameters()) == 0 and learned.pe.requires_grad


def test_errors():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(4, 7)
    with pytest.raises(ValueError, match="max_len"):
        SinusoidalPositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="no positions"):
        LearnedPositionalEncoding(8)(torch.randn(1, 0, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        LearnedPositionalEncoding(8)(torch.randn(1, 3, 6))
