"""The direction-of-context check (lmlib.course.type_your_own.context_directions) on models whose direction is known,
and the names notebooks import from the course modules."""

import pytest
import torch

from lmlib.course.type_your_own import context_directions
from lmlib.models.bert import Bert, BertConfig
from lmlib.models.gpt import GPT, GPTConfig

torch.set_num_threads(1)


def test_context_directions_of_a_causal_and_a_bidirectional_model():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=30, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0)).eval()
    bert = Bert(BertConfig(vocab_size=30, block_size=16, num_layers=2, num_heads=2, d_model=16, dropout=0.0)).eval()
    ids = torch.randint(0, 30, (1, 9))
    changed = ids.clone()
    changed[0, 4] = (ids[0, 4] + 1) % 30
    assert context_directions(lambda t: gpt.hidden_states(t)[0], ids, changed, 4) == {"earlier": False, "later": True}
    assert context_directions(lambda t: bert(t).hidden_states[-1], ids, changed, 4) == {"earlier": True, "later": True}
    with pytest.raises(ValueError) as error:
        context_directions(lambda t: gpt.hidden_states(t)[0], ids, changed, 9)
    assert "position 9" in str(error.value)


def test_every_name_a_notebook_imports_from_the_course_modules_exists():
    import ast
    import json
    from importlib import import_module
    from importlib.util import find_spec
    from pathlib import Path

    imported = set()
    for path in (Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code" and not "".join(cell["source"]).lstrip().startswith(("%", "!")):
                for node in ast.walk(ast.parse("".join(cell["source"]))):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lmlib.course"):
                        imported |= {(node.module, alias.name) for alias in node.names}
    assert ("lmlib.course.results", "gpu_transfer_rows") in imported
    missing = [f"{module}.{name}" for module, name in sorted(imported)
               if not hasattr(import_module(module), name) and find_spec(f"{module}.{name}") is None]
    assert not missing, f"notebooks import names that no longer exist: {missing}"
