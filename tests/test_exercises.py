"""Every exercise of every notebook can be failed, and no hint shows before the reader has tried.

Read from the committed notebooks (their source through `ast`, their stored outputs), never executed:

* A predict-then-run exercise (a cell calling ``check_prediction``) stores only the "no prediction" line: its stored
  output (what GitHub and the course website show to anyone who scrolls) must not reveal the measured value or why,
  nor may the cell print anything else. It is checked as ``check_prediction`` itself would judge three lazy
  predictions, with the measured value read from the stored output's metadata (kept there, not displayed): 0, a
  constant (1, -1, the example values the prediction cell suggests, the choices of a categorical prediction) and the
  checker's own measured expression, which a reader could copy into the prediction cell only if everything it names
  exists before the prediction is written (a literal answer always does).
* A check cell names its exercise, ``check("01 add-k bigram", answer, tiny)``: the reference lives in
  ``lmlib.course.answers``, and nothing in the cell computes it (its other arguments are the notebook's objects,
  passed as they are, not calls). ``check_value`` and ``check_function``, which take the reference from the cell,
  are not used in notebooks: the reader could run the reference to print the answer.
* A hint (a check's ``hint=``) appears in the stored outputs only after a wrong attempt; nothing prints hints
  outside a check.

A notebook still being fixed by its owner may be listed in ``STILL_FAILING``: its tests then must fail
(``xfail(strict=True)``), so the entry goes as soon as the notebook is fixed.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lmlib.course import exercises

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# notebook file name -> why it still fails (strict xfail: the entry must go once the notebook passes)
STILL_FAILING: dict[str, str] = {}

CHECKS = {"check_prediction", "check_value", "check_function", "check"}
# lmlib names that are the checks themselves, not references
NOT_REFERENCES = CHECKS | {"exercises"}
# what a check prints when nothing was attempted; any text after it is a hint shown too early
UNATTEMPTED_WITH_MORE = re.compile(r"^NOT YET .*?: (?:no answer yet|the function is not written yet)\.\s*\S")
WRONG_ATTEMPT = re.compile(r"^NOT YET .*?(: got |expected |raised )")
UNPREDICTED = re.compile("^" + re.escape(exercises.NO_PREDICTION).replace(re.escape("{name}"), "(?P<name>.*?)") + "$")


# ---------------------------------------------------------------------------------------------- reading notebooks

def _parse(source: str) -> ast.Module | None:
    # IPython magics and shell lines are not Python: blank them, keeping line numbers
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _prediction_metadata(cell: dict) -> list[dict]:
    return [out["metadata"][exercises.PREDICTION_METADATA] for out in cell.get("outputs", [])
            if exercises.PREDICTION_METADATA in out.get("metadata", {})]


def _output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append("".join(out["text"]))
        for kind in ("text/plain", "text/markdown", "text/html"):
            if kind in out.get("data", {}):
                parts.append("".join(out["data"][kind]))
    return "\n".join(parts)


def _walk_outside_functions(node: ast.AST):
    """ast.walk that does not enter function, lambda or class bodies (their names are not the notebook's)."""
    todo = [node]
    while todo:
        here = todo.pop()
        yield here
        for child in ast.iter_child_nodes(here):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(child)


def _target_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement binds in the notebook's namespace."""
    names = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(stmt.name)
    for node in _walk_outside_functions(stmt):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                names |= _target_names(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            names |= _target_names(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            names |= _target_names(node.optional_vars)
        elif isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not stmt:
            names.add(node.name)
    return names


def _free_names(expr: ast.AST) -> set[str]:
    """Names an expression reads from the namespace (not those bound by its own lambdas or comprehensions)."""
    local = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Lambda):
            local |= {a.arg for a in node.args.args + node.args.kwonlyargs}
            if node.args.vararg:
                local.add(node.args.vararg.arg)
        elif isinstance(node, ast.comprehension):
            local |= _target_names(node.target)
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local


def _root(node: ast.AST) -> str | None:
    """The name an attribute, subscript or call chain starts from: `a` in `a.b(1)[2].c`."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _check_kind(call: ast.Call) -> str | None:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name if name in CHECKS else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _literal_parts(node: ast.AST | None) -> list[str]:
    """The literal text of a string expression (constant parts of an f-string or a concatenation)."""
    if node is None:
        return []
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@dataclass
class Check:
    kind: str
    call: ast.Call
    cell: int          # index of the notebook cell
    position: int      # index of its top-level statement in the notebook's order
    output: str        # the cell's stored output
    stored: list = field(default_factory=list)  # the metadata check_prediction kept with its stored output


@dataclass
class Notebook:
    path: Path
    sources: dict[int, str] = field(default_factory=dict)
    outputs: dict[int, str] = field(default_factory=dict)
    metadata: dict[int, list] = field(default_factory=dict)
    statements: list[tuple[int, ast.stmt]] = field(default_factory=list)  # (cell, statement) in order
    checks: list[Check] = field(default_factory=list)
    unparsed: list[int] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Notebook:
        nb = cls(path)
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            nb.sources[i] = "".join(cell["source"])
            nb.outputs[i] = _output_text(cell)
            nb.metadata[i] = _prediction_metadata(cell)
            tree = _parse(nb.sources[i])
            if tree is None:
                nb.unparsed.append(i)
                continue
            for stmt in tree.body:
                nb.statements.append((i, stmt))
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Call) and _check_kind(node):
                        nb.checks.append(Check(_check_kind(node), node, i, len(nb.statements) - 1, nb.outputs[i],
                                               nb.metadata[i]))
        nb._find_references()
        return nb

    def _find_references(self) -> None:
        """Names imported from lmlib, and names bound to what a call into lmlib returned (derived objects)."""
        self.lmlib: set[str] = set()
        self.defs: dict[str, ast.AST] = {}
        assigns = []
        for _, stmt in self.statements:
            for node in _walk_outside_functions(stmt):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lmlib":
                    self.lmlib |= {a.asname or a.name for a in node.names}
                elif isinstance(node, ast.Import):
                    self.lmlib |= {(a.asname or a.name).split(".")[0] for a in node.names
                                   if a.name.split(".")[0] == "lmlib"}
                elif isinstance(node, ast.Assign):
                    assigns.append(node)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[stmt.name] = stmt
        self.lmlib -= NOT_REFERENCES
        self.derived: set[str] = set()
        changed = True
        while changed:
            changed = False
            for node in assigns:
                if self.calls_reference(node.value):
                    new = set().union(*(_target_names(t) for t in node.targets)) - self.derived
                    if new:
                        self.derived |= new
                        changed = True

    def calls_reference(self, expr: ast.AST, depth: int = 0) -> bool:
        """Whether `expr` computes its value by a call into lmlib (or into an object an lmlib call returned)."""
        for node in ast.walk(expr):
            if not isinstance(node, ast.Call):
                continue
            root = _root(node.func)
            if root in self.lmlib or root in getattr(self, "derived", ()):
                return True
            if root in self.defs and depth < 3:
                # a helper of the notebook's own: it counts when its body calls lmlib or it is handed an lmlib function
                if self.calls_reference(self.defs[root], depth + 1):
                    return True
                if any(isinstance(a, ast.Name) and a.id in self.lmlib for a in node.args):
                    return True
        return False

    def bound_before(self, position: int) -> set[str]:
        names = set(dir(builtins))
        for _, stmt in self.statements[:position]:
            names |= _bound_names(stmt)
        return names


def _params():
    return [pytest.param(path, id=path.stem, marks=[pytest.mark.xfail(strict=True, reason=STILL_FAILING[path.name])]
                         if path.name in STILL_FAILING else []) for path in NOTEBOOKS]


# -------------------------------------------------------------------------------------- predict-then-run exercises

def _shown_value(text: str):
    """The measured value as check_prediction printed it (its `fmt`), back as a number or a word."""
    text = text.strip()
    if text[:1] in "'\"" or text in ("True", "False"):
        return ast.literal_eval(text)
    number = text.replace(",", "")
    try:
        return float(number[:-1]) / 100 if number.endswith("%") else float(number)
    except ValueError:
        return text


def _same_node(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a, include_attributes=False) == ast.dump(b, include_attributes=False)


class _Substitute(ast.NodeTransformer):
    def __init__(self, pattern: ast.AST, value):
        self.pattern, self.value = pattern, value

    def visit(self, node):
        if isinstance(node, ast.expr) and _same_node(node, self.pattern):
            return ast.copy_location(ast.Constant(self.value), node)
        return super().visit(node)


def _tolerance(node: ast.expr | None, measured_node: ast.expr, measured):
    """The tolerance the check uses, with the measured expression replaced by its stored value."""
    if node is None:
        return None
    expr = ast.fix_missing_locations(ast.Expression(_Substitute(measured_node, measured).visit(
        ast.parse(ast.unparse(node), mode="eval").body)))
    return eval(compile(expr, "<tolerance>", "eval"), {"__builtins__": {}, "math": math, "max": max, "min": min,
                                                        "abs": abs, "round": round, "float": float})


def _judge(name: str, predicted, measured, tolerance) -> str | None:
    """check_prediction's verdict on `predicted`: None when it is judged wrong, else why the exercise failed."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            right = exercises.check_prediction(name, predicted, measured, tolerance)
        except ValueError as err:
            return f"check_prediction refuses the exercise: {err}"
    if right:
        first = printed.getvalue().splitlines()[0]
        return f"a prediction of {predicted!r} passes ({first})"
    return None


def _numbers_in(text: str) -> set[float]:
    return {float(m) for m in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])", text)}


def _choices(nb: Notebook, measured: str, comment: str) -> set[str]:
    """The answers a categorical prediction chooses among: those its prediction cell names in quotes, else the
    smallest literal list, tuple, set or dict of the notebook's code that holds the measured answer."""
    quoted = set(re.findall(r"[\"']([^\"']+)[\"']", comment))
    if measured.strip().lower() in {q.strip().lower() for q in quoted}:
        return quoted
    best = None
    for _, stmt in nb.statements:
        for node in ast.walk(stmt):
            items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(
                node, (ast.List, ast.Tuple, ast.Set)) else None
            if items is None:
                continue
            words = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
            if any(w.strip().lower() == measured.strip().lower() for w in words) and (
                    best is None or len(words) < len(best)):
                best = words
    return set(best or [measured])


def prediction_problems(nb: Notebook) -> list[str]:
    problems = []
    for check in (c for c in nb.checks if c.kind == "check_prediction"):
        call, where = check.call, f"{nb.path.name} cell {check.cell}"
        name_node, predicted, measured_node = (_argument(call, 0, "name"), _argument(call, 1, "predicted"),
                                               _argument(call, 2, "measured"))
        label = ast.unparse(name_node)
        literal = name_node.value if isinstance(name_node, ast.Constant) else None
        # 0. the stored output says only that nothing was predicted: no measured value, no why, nothing else
        shown = [line for line in check.output.splitlines() if line.strip()]
        revealing = [line for line in shown if not UNPREDICTED.match(line)]
        if revealing:
            problems.append(f"{where}: the stored output of check_prediction({label}) shows more than that no "
                            f"prediction was made, before any prediction: {revealing[0][:120]!r}")
            continue
        # the measured value, from the metadata check_prediction kept beside that line
        mine = [m for m in check.stored if literal is None or m["name"] == literal]
        if not shown or not mine:
            problems.append(f"{where}: check_prediction({label}) has no stored output to read its measured value from "
                            "(store the notebook's outputs)")
            continue
        measured = mine[0]["measured"]

        # 1. the checker's own expression, copied into the prediction cell
        if not isinstance(predicted, ast.Name):
            problems.append(f"{where}: check_prediction({label}) predicts {ast.unparse(predicted)!r}, not a variable "
                            "the reader sets before the run")
            continue
        assigned = [p for p in range(check.position + 1) if predicted.id in _bound_names(nb.statements[p][1])]
        if not assigned:
            problems.append(f"{where}: {predicted.id} is never set before check_prediction({label})")
            continue
        at = assigned[-1]
        if at == check.position:
            problems.append(f"{where}: {predicted.id} is set in the cell that measures, not before the run")
            continue
        free = _free_names(measured_node)
        if not free - nb.bound_before(at):
            problems.append(f"{where}: check_prediction({label}) measures {ast.unparse(measured_node)!r}, which the "
                            f"reader can write into {predicted.id} before the run (it "
                            + ("is a literal)" if not free else "names only what exists by then)"))

        # 2. zero and constants, judged by check_prediction's own rules
        try:
            tolerance = _tolerance(_argument(call, 3, "tolerance"), measured_node, measured)
        except Exception as err:  # a name check_prediction's caller computed elsewhere
            problems.append(f"{where}: the tolerance of check_prediction({label}) cannot be computed from the measured "
                            f"value and constants ({type(err).__name__}: {err})")
            continue
        cell, stmt = nb.statements[at]
        lines_of_prediction = nb.sources[cell].splitlines()[stmt.lineno - 1:stmt.end_lineno]
        comment = "\n".join(lines_of_prediction)
        if isinstance(measured, float):
            candidates = {0.0, 1.0, -1.0} | _numbers_in(comment)
            default = getattr(getattr(stmt, "value", None), "value", None)
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                candidates.add(float(default))
            for constant in sorted(candidates, key=lambda c: (c != 0, abs(c))):
                failure = _judge(literal or label, constant, measured, tolerance)
                if failure:
                    problems.append(f"{where}: check_prediction({label}): {failure}")
                    break
        else:
            failure = _judge(literal or label, 0, measured, tolerance)
            if failure:
                problems.append(f"{where}: check_prediction({label}): {failure}")
            choices = _choices(nb, str(measured), comment)
            if len({c.strip().lower() for c in choices}) < 3:
                problems.append(f"{where}: check_prediction({label}) asks to choose among {sorted(choices)}: a constant "
                                f"guess passes {1 / max(len(choices), 1):.0%} of the time; ask for a number or for one "
                                "of at least three choices")
    return problems


# --------------------------------------------------------------------------- check_value and check_function references

def _registered() -> dict:
    """Every named exercise: lmlib.course.answers.EXERCISES (notebooks 00-08), and the registry of notebooks 09-12
    (lmlib.course.answers_late) where it exists."""
    from lmlib.course import answers

    known = dict(answers.EXERCISES)
    with contextlib.suppress(ImportError):
        from lmlib.course import answers_late

        known.update(answers_late.EXERCISES)
    return known


def reference_problems(nb: Notebook) -> list[str]:
    """A check cell must not hold the reference it checks against: it names its exercise and passes the notebook's
    objects as they are, so there is no expression in it to run for the answer."""
    known = _registered()
    problems = []
    for check in (c for c in nb.checks if c.kind != "check_prediction"):
        call, where = check.call, f"{nb.path.name} cell {check.cell}"
        if check.kind in ("check_value", "check_function"):
            expected = _argument(call, 2, "expected" if check.kind == "check_value" else "reference")
            problems.append(f"{where}: {check.kind}({ast.unparse(_argument(call, 0, 'name'))}) takes its reference "
                            f"{ast.unparse(expected) if expected is not None else '(none)'!r} from the cell, where the "
                            "reader can run it for the answer; name the exercise with exercises.check and keep its "
                            "reference in lmlib.course.answers")
            continue
        name = _argument(call, 0, "exercise")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            problems.append(f"{where}: check({ast.unparse(name) if name else ''}) must name its exercise literally")
            continue
        if name.value not in known:
            problems.append(f"{where}: check({name.value!r}) names no exercise of lmlib.course.answers")
        for arg in call.args[2:]:
            if any(isinstance(n, (ast.Call, ast.Lambda, ast.BinOp)) for n in ast.walk(arg)):
                problems.append(f"{where}: check({name.value!r}) computes {ast.unparse(arg)!r} in the cell; pass the "
                                "notebook's objects as they are and let the hidden reference compute from them")
        answer = _argument(call, 1, "answer")
        if answer is not None and not isinstance(answer, ast.Name):
            problems.append(f"{where}: check({name.value!r}) checks {ast.unparse(answer)!r}, not a name the reader sets")
    return problems


# --------------------------------------------------------------------------------------------------------------- hints

def hint_problems(nb: Notebook) -> list[str]:
    problems = []
    hints = []
    for check in nb.checks:
        for part in _literal_parts(_argument(check.call, 99, "hint")):
            for piece in re.split(r"[{}]", part):
                if len(piece.strip()) >= 12:
                    hints.append((check, piece.strip()))
    for cell, text in nb.outputs.items():
        for line in text.splitlines():
            if UNATTEMPTED_WITH_MORE.match(line):
                problems.append(f"{nb.path.name} cell {cell} says more than 'not yet' before any attempt (a hint): "
                                f"{line[:120]!r}")
                continue
            for check, piece in hints:
                if piece in line and not WRONG_ATTEMPT.match(line):
                    problems.append(f"{nb.path.name} cell {cell} shows the hint of "
                                    f"{ast.unparse(_argument(check.call, 0, 'name'))} before any attempt: {line[:120]!r}")
    problems += _hints_that_are_the_answer(nb)
    problems += _hints_that_copy_the_solution(nb, hints)
    for cell, stmt in nb.statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _root(node.func) in {"print", "display", "Markdown"} and not _check_kind(node):
                if any(re.search(r"(?i)\bhint\b", s) for a in node.args for s in _literal_parts(a)):
                    problems.append(f"{nb.path.name} cell {cell} prints a hint outside a check; pass it as the check's "
                                    "hint=, which shows it only after a wrong attempt")
    return problems


def _solution_code(path: Path) -> list[str]:
    """The code lines of the notebook's solutions (fenced blocks and inline code inside ``<details>``)."""
    lines = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown" or "<details>" not in text:
            continue
        for block in re.findall(r"<details>(.*?)</details>", text, flags=re.S):
            for fenced in re.findall(r"```(?:python)?\n(.*?)```", block, flags=re.S):
                lines += fenced.splitlines()
            lines += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", block, flags=re.S))
    return [line.strip() for line in lines if line.strip()]


def _hints_that_copy_the_solution(nb: Notebook, hints) -> list[str]:
    """A hint that holds a piece of the solution's code (12 or more characters, spaces aside, with two or more
    operators or brackets in it) hands the reader the answer instead of pointing the way."""
    import difflib

    problems = []
    solution = [re.sub(r"\s+", "", line) for line in _solution_code(nb.path)]
    for check, piece in hints:
        squeezed = re.sub(r"\s+", "", piece)
        for line in solution:
            match = difflib.SequenceMatcher(None, squeezed, line, autojunk=False).find_longest_match(
                0, len(squeezed), 0, len(line))
            common = squeezed[match.a:match.a + match.size]
            if match.size >= 12 and len(re.findall(r"[\[\]()=+*/%<>-]", common)) >= 2:
                problems.append(f"{nb.path.name} cell {check.cell}: the hint of "
                                f"{ast.unparse(_argument(check.call, 0, 'name'))} holds the solution's code "
                                f"{common!r}; point the way instead")
                break
    return problems


_MATH = {name: getattr(math, name) for name in ("cos", "sin", "exp", "log", "sqrt", "tanh", "pi", "e")}


def _numbers_a_hint_spells_out(hint: str) -> list[float]:
    """Values of the arithmetic a hint writes out in full, e.g. 6.0 for "2 * 3" and for "cos(0) * 6"."""
    values = []
    for piece in re.split(r"[:;,=]| with | so | then | is ", hint):
        try:
            value = eval(compile(piece.strip(), "<hint>", "eval"), {"__builtins__": {}, **_MATH})
        except Exception:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))
    return values


def _hints_that_are_the_answer(nb: Notebook) -> list[str]:
    """A check_value whose hint writes out arithmetic that evaluates to the expected value gives the answer away.
    The expected value is computed where it needs only the notebook's imports (lmlib's functions, math)."""
    known = _registered()
    problems, namespace = [], None
    for check in (c for c in nb.checks if c.kind in ("check_value", "check")):
        spelled = [v for part in _literal_parts(_argument(check.call, 99, "hint"))
                   for v in _numbers_a_hint_spells_out(part)]
        if not spelled:
            continue
        if check.kind == "check":
            name = _argument(check.call, 0, "exercise")
            spec = known.get(getattr(name, "value", None))
            if spec is None or spec.kind != "value" or len(check.call.args) > 2:
                continue  # a function exercise, or one whose reference needs the notebook's objects
            value = float(spec.reference())
            if any(math.isclose(v, value, rel_tol=1e-6, abs_tol=1e-12) for v in spelled):
                problems.append(f"{nb.path.name} cell {check.cell}: the hint of check({name.value!r}) writes out the "
                                f"answer ({value:g}); point the way in the hint and put the answer in a solution")
            continue
        expected = _argument(check.call, 2, "expected")
        if expected is None:
            continue
        if namespace is None:
            namespace = {"math": math}
            for _, stmt in nb.statements:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    with contextlib.suppress(Exception):
                        exec(compile(ast.Module([stmt], []), "<imports>", "exec"), namespace)
        try:
            value = eval(compile(ast.Expression(expected), "<expected>", "eval"), dict(namespace))
            value = float(value)
        except Exception:
            continue  # the expected value needs the notebook's state: not judged here
        if any(math.isclose(v, value, rel_tol=1e-6, abs_tol=1e-12) for v in spelled):
            problems.append(f"{nb.path.name} cell {check.cell}: the hint of check_value("
                            f"{ast.unparse(_argument(check.call, 0, 'name'))}) writes out the answer ({value:g}); "
                            "point the way in the hint and put the answer in a solution")
    return problems


# --------------------------------------------------------------------------------------------------------------- tests

def _report(problems: list[str]) -> str:
    return "\n".join(["", *problems])


def test_every_notebook_is_read():
    assert len(NOTEBOOKS) >= 13
    for path in NOTEBOOKS:
        assert not Notebook.read(path).unparsed, f"{path.name}: cells that are not Python cannot be checked"
    assert set(STILL_FAILING) <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", _params())
def test_predict_then_run_exercises_can_be_failed(path):
    problems = prediction_problems(Notebook.read(path))
    assert not problems, _report(problems)


@pytest.mark.parametrize("path", _params())
def test_checks_compare_with_a_reference_the_reader_cannot_copy(path):
    problems = reference_problems(Notebook.read(path))
    assert not problems, _report(problems)


@pytest.mark.parametrize("path", _params())
def test_hints_show_only_after_a_wrong_attempt(path):
    problems = hint_problems(Notebook.read(path))
    assert not problems, _report(problems)


# ------------------------------------------------------------------ the checks above, on notebooks broken on purpose

def _outputs(output: str, stored: dict | None) -> list[dict]:
    if stored is not None:  # what check_prediction publishes without a prediction: the line, the value beside it
        return [{"output_type": "display_data", "data": {"text/plain": output.rstrip("\n")},
                 "metadata": {exercises.PREDICTION_METADATA: stored}}]
    return [{"output_type": "stream", "name": "stdout", "text": output}] if output else []


def _notebook(tmp_path, *cells) -> Notebook:
    """A notebook of code cells, each (source, stored output) or (source, stored output, prediction metadata)."""
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": cell[0], "execution_count": None,
                     "outputs": _outputs(cell[1], cell[2] if len(cell) > 2 else None)}
                    for cell in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99_broken.ipynb"
    path.write_text(json.dumps(nb))
    return Notebook.read(path)


IMPORTS = ("from lmlib.course.exercises import check_prediction, check_value\n"
           "from lmlib.eval.metrics import corpus_bleu\nimport math", "")
PREDICT = ("my_prediction = None  # e.g. 0.5", "")


def _predict_and_run(tmp_path, check: str, measured: str, measure: str = "gap = run()", printed: str = ""):
    stored = {"name": "gap", "measured": _shown_value(measured), "tolerance": None, "fmt": "{:.3g}"}
    return prediction_problems(_notebook(tmp_path, IMPORTS, PREDICT, (
        f"{measure}\n{check}", printed + exercises.NO_PREDICTION.format(name="gap") + "\n", stored)))


def test_a_fair_prediction_passes(tmp_path):
    assert _predict_and_run(tmp_path, 'check_prediction("gap", my_prediction, gap, tolerance=0.1)', "1.40") == []
    assert _predict_and_run(tmp_path, 'check_prediction("gap", my_prediction, gap, tolerance=gap / 4, fmt="{:.0f}")',
                            "368") == []


@pytest.mark.parametrize("check, measured, says", [
    ('check_prediction("gap", my_prediction, gap, tolerance=0.01)', "0.0068", "lets a prediction of 0 pass"),
    ('check_prediction("gap", my_prediction, gap, tolerance=max(0.01, gap / 2))', "0.68%", "lets a prediction of 0"),
    ('check_prediction("gap", my_prediction, gap, tolerance=0.1)', "0.55", "a prediction of 0.5 passes"),
    ('check_prediction("gap", my_prediction, gap, tolerance=0.2)', "0.95", "a prediction of 1.0 passes"),
    ('check_prediction("gap", my_prediction, 0.0068, tolerance=0.001)', "0.0068", "is a literal"),
    ('check_prediction("gap", my_prediction, math.log(20), tolerance=0.1)', "3.0", "names only what exists"),
    ('check_prediction("gap", my_prediction, gap)', "0.3", "needs a tolerance"),
    ('check_prediction("gap", my_prediction, gap, tolerance=width)', "0.3", "cannot be computed"),
    ('check_prediction("gap", my_prediction, gap > 0.5)', "True", "yes/no prediction"),
    ('check_prediction("gap", my_prediction, max(d, key=d.get))', "'top-p'", "a constant guess passes 50%"),
], ids=["zero", "zero-relative", "suggested-constant", "constant-one", "literal", "copyable", "no-tolerance",
        "unknown-tolerance", "yes-no", "two-choices"])
def test_a_prediction_that_cannot_be_failed_is_found(tmp_path, check, measured, says):
    problems = _predict_and_run(tmp_path, check, measured, measure='d = {"top-p": 0.1, "temperature": 0.0}\ngap = run()')
    assert problems and says in problems[0], problems


@pytest.mark.parametrize("printed", [
    "RIGHT gap: you predicted 1.4, the run measured 1.40 (off by 0; within 0.1 counts as right).\n",
    "Why: the gap closes\n", "the run measured 1.40\n"], ids=["verdict", "why", "a print"])
def test_a_stored_output_that_reveals_the_answer_is_found(tmp_path, printed):
    check = 'check_prediction("gap", my_prediction, gap, tolerance=0.1)'
    assert _predict_and_run(tmp_path, check, "1.40") == []
    problems = _predict_and_run(tmp_path, check, "1.40", printed=printed)
    assert problems and "shows more than that no prediction was made" in problems[0], problems


def test_check_prediction_stores_neither_the_measured_value_nor_why(tmp_path):
    """Run check_prediction without a prediction in a real kernel's display machinery: what it publishes is only the
    no-prediction line; the value is in the output's metadata."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    shell.display_pub.publish = lambda data, metadata=None, **kw: published.append((data, metadata))
    try:
        exercises.check_prediction("gap", None, 1.40625, tolerance=0.1, why="SECRET-WHY", details="SECRET-TABLE")
    finally:
        InteractiveShell.clear_instance()
    [(data, metadata)] = published
    assert data == {"text/plain": exercises.NO_PREDICTION.format(name="gap")}
    assert "1.4" not in data["text/plain"] and "SECRET" not in str(data)
    assert metadata[exercises.PREDICTION_METADATA]["measured"] == 1.40625


def test_a_prediction_without_a_stored_output_is_found(tmp_path):
    problems = prediction_problems(_notebook(tmp_path, IMPORTS, PREDICT, (
        'gap = run()\ncheck_prediction("gap", my_prediction, gap, tolerance=0.1)', "")))
    assert problems and "no stored output" in problems[0]


@pytest.mark.parametrize("check, ok", [
    ("check('01 add-k bigram', answer, tiny)", True),
    ("exercises.check('04 BLEU-2 of \\'il est grand\\'', answer)", True),
    ("check('01 add-k bigram', answer, tiny[:1])", True),  # an object of the notebook, sliced, computes nothing
    ("check('01 add-k bigram', answer, make_tiny())", False),
    ("check('01 add-k bigram', answer, lambda: tiny)", False),
    ("check('no such exercise', answer, tiny)", False),
    ("check(name, answer, tiny)", False),
    ("check('01 add-k bigram', answer == 0.5, tiny)", False),
    ("check_value('bleu', answer, corpus_bleu(hyp, ref))", False),  # the reference, there to run for the answer
    ("check_value('bleu', answer, math.exp(1 - 4 / 3))", False),
    ("check_function('bleu', my_bleu, corpus_bleu, [(hyp, ref)])", False),
    ("check_function('z', my_z, lambda a, b: (a - b) / math.hypot(a, b), [(1, 2)])", False),
])
def test_a_reference_the_reader_can_run_for_the_answer_is_found(tmp_path, check, ok):
    helper = ("from lmlib.course import exercises\nfrom lmlib.course.exercises import check\nanswer = None", "")
    problems = reference_problems(_notebook(tmp_path, IMPORTS, helper, (check, "")))
    assert (problems == []) is ok, problems


def test_a_hint_shown_before_an_attempt_is_found(tmp_path):
    check = "check_value('bleu', answer, corpus_bleu(hyp, ref), hint='the brevity penalty is below one')"
    unattempted = "NOT YET bleu: no answer yet. the brevity penalty is below one\n"
    wrong = "NOT YET bleu: got 0.5. the brevity penalty is below one\n"
    assert hint_problems(_notebook(tmp_path, IMPORTS, (check, "NOT YET bleu: no answer yet.\n"))) == []
    assert hint_problems(_notebook(tmp_path, IMPORTS, (check, wrong))) == []
    assert "before any attempt" in hint_problems(_notebook(tmp_path, IMPORTS, (check, unattempted)))[0]
    printed = ("print('Hint: the brevity penalty is below one')", "Hint: the brevity penalty is below one\n")
    assert any("outside a check" in p for p in hint_problems(_notebook(tmp_path, IMPORTS, (check, ""), printed)))


def test_a_hint_that_is_the_solution_is_found(tmp_path):
    solution = {"cell_type": "markdown", "metadata": {}, "source": (
        "<details><summary>Solution</summary>\n\n```python\ndef my_reverse(x, lengths):\n    out = x.clone()\n"
        "    for b, n in enumerate(lengths):\n        out[b, :n] = x[b, :n].flip(0)\n    return out\n```\n</details>")}
    for hint, found in (("out[b, :n] = x[b, :n].flip(0)", True), ("flip only the real tokens of each row", False)):
        nb = _notebook(tmp_path, IMPORTS, (f"check('03 one coupled-gate LSTM step', my_reverse, hint={hint!r})", ""))
        raw = json.loads(nb.path.read_text())
        raw["cells"].append(solution)
        nb.path.write_text(json.dumps(raw))
        problems = hint_problems(Notebook.read(nb.path))
        assert bool(problems) is found and (not found or "holds the solution's code" in problems[0]), problems


def test_a_hint_that_writes_out_the_answer_is_found(tmp_path):
    imports = ("from lmlib.course.exercises import check_value\nfrom lmlib.models.positional import "
               "sinusoidal_encoding", "")
    for hint, found in (("cos(3 / 10000 ** (4 / 8))", True), ("index 5 is odd: a cosine", False)):
        check = f"check_value('PE', answer, sinusoidal_encoding(4, 8)[3, 5].item(), hint={hint!r})"
        assert bool(hint_problems(_notebook(tmp_path, imports, (check, "")))) is found
