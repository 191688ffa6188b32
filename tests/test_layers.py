"""The package's layers point one way: data and text < models < training < recipes < course.

Every module's imports (also those inside functions) are read with ``ast`` and checked against the
layer it sits in, so a model that reaches for the Trainer, or a training module that draws with the
course's plots, fails here rather than in a reader's head. ``lmlib/__init__.py`` and ``__main__.py``
(the package's front door and command line) may import from any layer.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lmlib"
LOWEST = {"runtime"}  # seeding, device choice and eval_mode: usable by every layer
MAY_IMPORT = {
    "runtime": set(),
    "data": {"data"},
    "text": {"text", "data"},
    "models": {"models", "text", "data"},
    "eval": {"eval", "models", "text", "data"},
    "training": {"training", "text", "data"},
    "recipes": {"recipes", "training", "eval", "models", "text", "data"},
    "course": {"course", "recipes", "training", "eval", "models", "text", "data"},
}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.stem not in ("__init__", "__main__"))


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported_layers(path: Path, package_dir: Path = PACKAGE) -> set[tuple[str, int]]:
    """(layer, line) of every lmlib module that ``path`` (a file under ``package_dir``) imports."""
    rel = path.relative_to(package_dir.parent).with_suffix("")
    package = list(rel.parts if path.stem == "__init__" else rel.parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            base = base + (node.module.split(".") if node.module else [])
            # `from .. import data` names a module; `from ..data import load_ptb` names something in one
            targets = [base + [alias.name] for alias in node.names] if not node.module else [base]
        else:
            continue
        for parts in targets:
            if parts[0] == "lmlib" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def test_every_module_sits_in_a_known_layer():
    unknown = sorted({layer_of(p) for p in modules()} - set(MAY_IMPORT))
    assert not unknown, f"place these in a layer of MAY_IMPORT (and mind which way they point): {unknown}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    layer = layer_of(path)
    allowed = MAY_IMPORT[layer] | LOWEST
    wrong = sorted((line, target) for target, line in imported_layers(path) if target not in allowed)
    assert not wrong, (f"{path.relative_to(PACKAGE.parent)} ({layer}) imports from a layer above or beside it: "
                       + ", ".join(f"lmlib.{target} (line {line})" for line, target in wrong)
                       + f"; {layer} may import only {sorted(allowed)}")


def test_the_checker_sees_relative_absolute_and_local_imports(tmp_path):
    probe = tmp_path / "lmlib" / "models" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..training.trainer import Trainer\nimport lmlib.course.viz\nfrom . import rnn\n\n"
                     "def f():\n    from .. import recipes\n")
    assert {t for t, _ in imported_layers(probe, tmp_path / "lmlib")} == {"training", "course", "recipes", "models"}
