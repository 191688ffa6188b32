"""Positional encodings against the paper's formula (§3.5)."""

import math

import pytest
import torch

from lmlib.models.positional import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    position_similarity,
    sinusoidal_encoding,
)


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
    with pytest.raises(ValueError, match="7"):
        sinusoidal_encoding(4, 7)
    with pytest.raises(ValueError, match="max_len"):
        SinusoidalPositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="no positions"):
        LearnedPositionalEncoding(8)(torch.randn(1, 0, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        LearnedPositionalEncoding(8)(torch.randn(1, 3, 6))


def paper_table_float64(num_positions, d_model):
    """§3.5 in float64, entry by entry: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    for pos in range(num_positions):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


@pytest.mark.parametrize("d_model", [2, 6, 64])
def test_sinusoidal_module_adds_the_papers_table_computed_in_float64(d_model):
    want = paper_table_float64(200, d_model)
    torch.testing.assert_close(sinusoidal_encoding(200, d_model).double(), want, atol=1e-6, rtol=0)
    module = SinusoidalPositionalEncoding(d_model, max_len=200)
    x = torch.randn(2, 40, d_model)
    for offset in (0, 17, 160):
        got = module(x, offset=offset).double()
        torch.testing.assert_close(got - x.double(), want[offset:offset + 40].expand(2, 40, d_model), atol=2e-6, rtol=0)


def test_sinusoid_at_pos_plus_k_is_a_rotation_of_the_sinusoid_at_pos():
    # sin(a + b) = cos(b) sin(a) + sin(b) cos(a),  cos(a + b) = -sin(b) sin(a) + cos(b) cos(a): with a = pos·ω_i and
    # b = k·ω_i, pair i of PE(pos + k) is the 2×2 rotation R(k·ω_i) of pair i of PE(pos), whatever pos is.
    d = 16
    pe = sinusoidal_encoding(120, d).double()
    omega = [10000 ** (-2 * i / d) for i in range(d // 2)]
    for k in (1, 5, 37):
        M = torch.zeros(d, d, dtype=torch.float64)
        for i, w in enumerate(omega):
            c, s = math.cos(k * w), math.sin(k * w)
            M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=torch.float64))  # a rotation: orthogonal
        torch.testing.assert_close(pe[:-k] @ M.T, pe[k:], atol=1e-5, rtol=0)  # one M serves every pos


def test_learned_encoding_adds_exactly_its_own_rows_and_trains_only_those():
    torch.manual_seed(0)
    learned = LearnedPositionalEncoding(4, max_len=10)
    table = learned.pe.detach().clone()
    x = torch.randn(3, 5, 4)
    for offset in (0, 2, 5):
        out = learned(x, offset=offset)
        for b in range(3):
            for t in range(5):  # a manual gather: row offset + t of the table goes to position t
                assert torch.equal(out[b, t], x[b, t] + table[offset + t])
    # gradient: d out[b, t] / d pe[offset + t] is the identity, so pe[offset + t] collects the upstream
    # gradient of position t summed over the batch; rows outside offset..offset+4 get exactly zero
    upstream = torch.randn(3, 5, 4)
    x.requires_grad_(True)
    (learned(x, offset=2) * upstream).sum().backward()
    want = torch.zeros(10, 4)
    want[2:7] = upstream.sum(0)
    torch.testing.assert_close(learned.pe.grad, want)
    assert torch.equal(learned.pe.grad[:2], torch.zeros(2, 4)) and torch.equal(learned.pe.grad[7:], torch.zeros(3, 4))
    torch.testing.assert_close(x.grad, upstream)
