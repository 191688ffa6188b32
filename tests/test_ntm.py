"""NTM addressing, each step on a 4 × 2 memory small enough to check with pencil and paper."""

import math

import pytest
import torch

from lmlib.models.ntm import (
    address,
    content_weighting,
    cosine_similarity,
    interpolate,
    read,
    sharpen,
    shift,
    write,
)

# Four memory rows of width 2. Rows 0 and 3 point the same way, row 1 is orthogonal, row 2 opposite.
M = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [5.0, 0.0]])


def close(got, want):
    torch.testing.assert_close(got, torch.as_tensor(want, dtype=torch.float32), rtol=1e-5, atol=1e-6)


def test_cosine_similarity():
    # key (1, 0): cos with (1,0) = 1, with (0,2) = 0, with (-3,0) = -1, with (5,0) = 1 (length does not matter)
    close(cosine_similarity(torch.tensor([2.0, 0.0]), M), [1.0, 0.0, -1.0, 1.0])
    # key (1, 1)/√2 direction: cos = 1/√2 with rows 0, 1 and 3; -1/√2 with row 2
    r = 1 / math.sqrt(2)
    close(cosine_similarity(torch.tensor([1.0, 1.0]), M), [r, r, -r, r])


def test_content_weighting():
    key = torch.tensor([1.0, 0.0])
    # β = ln 2: exp(β K) = 2^K = [2, 1, 1/2, 2], total 5.5
    close(content_weighting(M, key, math.log(2.0)), [2 / 5.5, 1 / 5.5, 0.5 / 5.5, 2 / 5.5])
    # β = 0 ignores the content entirely: uniform 1/4
    close(content_weighting(M, key, 0.0), [0.25] * 4)
    with pytest.raises(ValueError, match="beta"):
        content_weighting(M, key, -1.0)


def test_interpolate():
    w_c = torch.tensor([0.5, 0.5, 0.0, 0.0])
    w_prev = torch.tensor([0.0, 0.0, 0.0, 1.0])
    # g = 0.25: 0.25 · [.5, .5, 0, 0] + 0.75 · [0, 0, 0, 1] = [.125, .125, 0, .75]
    close(interpolate(w_c, w_prev, 0.25), [0.125, 0.125, 0.0, 0.75])
    close(interpolate(w_c, w_prev, 1.0), w_c)
    close(interpolate(w_c, w_prev, 0.0), w_prev)
    with pytest.raises(ValueError, match="1.5"):
        interpolate(w_c, w_prev, 1.5)


def test_shift_circular():
    w = torch.tensor([0.7, 0.2, 0.1, 0.0])
    # all mass on +1: every weight moves one row down, the last wraps to the top
    close(shift(w, torch.tensor([0.0, 0.0, 1.0])), [0.0, 0.7, 0.2, 0.1])
    # all mass on -1: one row up, row 0 wraps to the bottom
    close(shift(w, torch.tensor([1.0, 0.0, 0.0])), [0.2, 0.1, 0.0, 0.7])
    # s = (s(-1), s(0), s(+1)) = (0.25, 0.5, 0.25): w̃(i) = .25 w(i+1) + .5 w(i) + .25 w(i-1)
    # w̃(0) = .25·.2 + .5·.7 + .25·0 = .40;  w̃(1) = .25·.1 + .5·.2 + .25·.7 = .30
    # w̃(2) = .25·0 + .5·.1 + .25·.2 = .10;  w̃(3) = .25·.7 + .5·0 + .25·.1 = .20
    close(shift(w, torch.tensor([0.25, 0.5, 0.25])), [0.40, 0.30, 0.10, 0.20])
    with pytest.raises(ValueError, match="0.5"):
        shift(w, torch.tensor([0.5, 0.0, 0.0]))


def test_sharpen():
    w = torch.tensor([0.40, 0.30, 0.10, 0.20])
    # γ = 2: squares .16, .09, .01, .04, total .30
    close(sharpen(w, 2.0), [0.16 / 0.3, 0.09 / 0.3, 0.01 / 0.3, 0.04 / 0.3])
    close(sharpen(w, 1.0), w)
    with pytest.raises(ValueError, match="gamma"):
        sharpen(w, 0.5)


def test_read_and_write():
    w = torch.tensor([0.5, 0.0, 0.0, 0.5])
    # r = .5 (1, 0) + .5 (5, 0) = (3, 0)
    close(read(M, w), [3.0, 0.0])
    erase, add = torch.tensor([1.0, 0.0]), torch.tensor([10.0, 4.0])
    new = write(M, w, erase, add)
    # rows 0 and 3: first component × (1 - .5·1), second unchanged; then + .5 (10, 4)
    # row 0: (1·.5 + 5, 0 + 2) = (5.5, 2);  row 3: (5·.5 + 5, 0 + 2) = (7.5, 2); rows 1, 2 untouched
    close(new, [[5.5, 2.0], [0.0, 2.0], [-3.0, 0.0], [7.5, 2.0]])
    close(M, [[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [5.0, 0.0]])  # the old memory is not modified
    # full erase with weight 1 on a row, then add: the row becomes exactly a
    one_hot = torch.tensor([0.0, 1.0, 0.0, 0.0])
    close(write(M, one_hot, torch.ones(2), torch.tensor([7.0, 8.0]))[1], [7.0, 8.0])
    with pytest.raises(ValueError, match="erase"):
        write(M, w, torch.tensor([2.0, 0.0]), add)


def test_address_pipeline_and_batch():
    key, w_prev = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0, 0.0, 0.0])
    steps = address(M, w_prev, key, beta=math.log(2.0), g=1.0, s=torch.tensor([0.0, 0.0, 1.0]), gamma=1.0)
    close(steps.content, [2 / 5.5, 1 / 5.5, 0.5 / 5.5, 2 / 5.5])
    close(steps.gated, steps.content)
    close(steps.shifted, [2 / 5.5, 2 / 5.5, 1 / 5.5, 0.5 / 5.5])
    close(steps.sharpened, steps.shifted)
    # a batch of two heads with different parameters equals two separate calls
    memories = torch.stack([M, M.flip(0)])
    keys, prev = torch.stack([key, torch.tensor([0.0, 1.0])]), torch.stack([w_prev, w_prev.flip(0)])
    shifts = torch.tensor([[0.0, 1.0, 0.0], [0.1, 0.8, 0.1]])
    beta, g, gamma = torch.tensor([1.0, 3.0]), torch.tensor([0.5, 0.9]), torch.tensor([1.0, 2.0])
    batched = address(memories, prev, keys, beta, g, shifts, gamma)
    for b in range(2):
        single = address(memories[b], prev[b], keys[b], beta[b].item(), g[b].item(), shifts[b], gamma[b].item())
        for got, want in zip(batched, single):
            close(got[b], want)
        torch.testing.assert_close(batched.sharpened.sum(-1), torch.ones(2))
    with pytest.raises(ValueError, match="w_prev"):
        address(M, torch.tensor([0.5, 0.5]), key, 1.0, 1.0, torch.tensor([0.0, 1.0, 0.0]), 1.0)


@pytest.mark.parametrize("which", ["cosine_similarity", "content_weighting", "read", "write", "address"])
@pytest.mark.parametrize("memory", [torch.zeros(0, 2), torch.zeros(4, 0), torch.zeros(0, 4, 2)],
                         ids=["no rows", "no components", "empty batch"])
def test_empty_memory_is_an_error(memory, which):
    n, m = memory.shape[-2], memory.shape[-1]
    w, key, vec = torch.full((n,), 1 / max(n, 1)), torch.ones(m), torch.zeros(m)
    calls = {
        "cosine_similarity": lambda: cosine_similarity(key, memory),
        "content_weighting": lambda: content_weighting(memory, key, 1.0),
        "read": lambda: read(memory, w),
        "write": lambda: write(memory, w, vec, vec),
        "address": lambda: address(memory, w, key, 1.0, 1.0, torch.tensor([0.0, 1.0, 0.0]), 1.0),
    }
    with pytest.raises(ValueError, match="memory is empty"):
        calls[which]()
