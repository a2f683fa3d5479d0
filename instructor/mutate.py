"""Make mutants of a lab's solution: copies of it with one small, plausible mistake each.

A mutant is what a tired student might write: ``<`` for ``<=``, ``and`` for ``or``, an
off-by-one constant, a ``break`` that became ``continue``, a line (or a whole ``if``)
left out. If the lab's tests still pass on a mutant, either the tests miss a mistake a
student could make, or the mutant behaves exactly like the original (an *equivalent*
mutant, which the lab lists with its reason). :mod:`instructor.mutants` runs them.

Each mutant has an id built from where it is and what it changes, not from line numbers
(``StreamingDetokenizer.feed: held < 3 -> held <= 3``), so the list of equivalents still
matches after unrelated edits move the code around.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# What each operator becomes. One replacement each keeps the count of mutants (and so the
# time a run takes) proportional to the code, while still covering the classic slips.
_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {ast.Add: ast.Sub, ast.Sub: ast.Add}
# A statement left out is replaced by ``pass``; these are the kinds worth leaving out.
_REMOVABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Raise, ast.Return,
              ast.If, ast.For, ast.While, ast.Try, ast.With, ast.Delete)


@dataclass(frozen=True)
class Mutant:
    """One mistake: ``id`` names it stably, ``line`` is where it is today, ``source`` is the mutated module."""

    id: str
    line: int
    source: str


@dataclass(frozen=True)
class _Site:
    """A place in the tree and how to change it (applied to a fresh copy, found by walk order)."""

    node_index: int
    describe: Callable[[ast.AST], tuple[str, str]]  # (original text, mutated text)
    apply: Callable[[ast.AST], ast.AST | None]  # returns a replacement node, or mutates in place (None)


def mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source``, in the order they appear in the file."""
    tree = ast.parse(source)
    skipped = _skipped_nodes(tree)
    scopes = _scope_names(tree)
    found: list[Mutant] = []
    seen: Counter[str] = Counter()
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skipped:
            continue
        for site in _sites(node, index):
            mutated_tree = copy.deepcopy(tree)
            target = next(n for i, n in enumerate(ast.walk(mutated_tree)) if i == index)
            before, after = site.describe(node)
            if isinstance(node, ast.Constant) and type(node.value) is int:
                before, after = _as_written(source, node, after)
            replacement = site.apply(target)
            if replacement is not None:
                _replace(mutated_tree, target, replacement)
            base_id = f"{scopes.get(id(node), '<module>')}: {before} -> {after}"
            seen[base_id] += 1
            mutant_id = base_id if seen[base_id] == 1 else f"{base_id} #{seen[base_id]}"
            mutated_source = ast.unparse(ast.fix_missing_locations(mutated_tree))
            found.append(Mutant(mutant_id, getattr(node, "lineno", 0), mutated_source))
    return sorted(found, key=lambda m: m.line)


def _sites(node: ast.AST, index: int) -> Iterator[_Site]:
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None:
                yield _Site(index, _describe_swap(k, swap), _apply_compare(k, swap))
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
        yield _Site(index, _describe_binop, _apply_binop)
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        # ``total += x`` -> ``total = x``: the accumulation forgotten.
        yield _Site(index, lambda n: (_text(n), _text(_forget_accumulation(n))), _forget_accumulation)
    elif isinstance(node, ast.BoolOp):
        yield _Site(index, _describe_boolop, _apply_boolop)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Site(index, lambda n: (_text(n), _text(n.operand)), lambda n: n.operand)  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        for delta in (1, -1):
            yield _Site(index, _describe_int(delta), _apply_int(delta))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield _Site(index, lambda n: (_text(n), str(not n.value)),  # type: ignore[attr-defined]
                    lambda n: ast.copy_location(ast.Constant(not n.value), n))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
        yield _Site(index, lambda n: (_text(n), repr("X" + n.value)),  # type: ignore[attr-defined]
                    lambda n: ast.copy_location(ast.Constant("X" + n.value), n))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Break):
        yield _Site(index, lambda n: ("break", "continue"), lambda n: ast.copy_location(ast.Continue(), n))
    elif isinstance(node, ast.Continue):
        yield _Site(index, lambda n: ("continue", "break"), lambda n: ast.copy_location(ast.Break(), n))
    if isinstance(node, _REMOVABLE) and not _is_bare_return(node):
        yield _Site(index, lambda n: (_first_line(n), "pass"), lambda n: ast.copy_location(ast.Pass(), n))


def _forget_accumulation(node: ast.AST) -> ast.AST:
    return ast.copy_location(ast.Assign([node.target], node.value), node)  # type: ignore[attr-defined]


def _is_bare_return(node: ast.AST) -> bool:
    return isinstance(node, ast.Return) and (node.value is None or _text(node.value) == "None")


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """Nodes no mistake is made in: docstrings, annotations, decorators, imports, error messages.

    Changing these says nothing about the lesson: a type hint or a dataclass option does not
    run, and the wording of an error message is not what the tests pin (its kind is).
    """
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip(body[0])  # a docstring
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assert, ast.JoinedStr)):
            skip(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                skip(decorator)
            if not isinstance(node, ast.ClassDef):
                skip(node.returns)
                for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                            node.args.vararg, node.args.kwarg]:
                    skip(arg.annotation if arg else None)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
            if node.value is None:
                skip(node)
        elif isinstance(node, ast.Raise):
            skip(node.exc)  # the message; leaving the whole raise out is still a mutant
            skipped.discard(id(node))
        elif _is_bookkeeping(node):
            skip(node)
    return skipped


def _is_bookkeeping(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``, ``if __name__ == '__main__':``, ``__all__`` and ``__slots__``."""
    if isinstance(node, ast.If):
        return _text(node.test) in ("TYPE_CHECKING", "__name__ == '__main__'")
    return isinstance(node, ast.Assign) and any(_text(t) in ("__all__", "__slots__") for t in node.targets)


def _scope_names(tree: ast.Module) -> dict[int, str]:
    """The qualified name (``Class.method``) of the function or class around each node."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            visit(child, inner)  # first, so the innermost scope claims its nodes
            names.setdefault(id(child), inner or "<module>")

    visit(tree, "")
    return names


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(v is old for v in value):
                value[next(i for i, v in enumerate(value) if v is old)] = new
                return
    raise LookupError("node to replace not found")


def _as_written(source: str, node: ast.Constant, after: str) -> tuple[str, str]:
    """A hex literal stays hex in the id (``0xA0 -> 0xA1``): byte values read as bytes."""
    written = ast.get_source_segment(source, node) or repr(node.value)
    if written.lower().startswith("0x"):
        return written, f"0x{int(after):02X}" if int(after) >= 0 else after
    return written, after


def _text(node: ast.AST) -> str:
    return ast.unparse(node)


def _first_line(node: ast.AST) -> str:
    text = _text(node).splitlines()[0]
    return text if len(text) <= 60 else text[:57] + "..."


def _describe_swap(k: int, swap: type[ast.cmpop]) -> Callable[[ast.AST], tuple[str, str]]:
    def describe(node: ast.AST) -> tuple[str, str]:
        mutated = copy.deepcopy(node)
        mutated.ops[k] = swap()  # type: ignore[attr-defined]
        return _text(node), _text(mutated)
    return describe


def _apply_compare(k: int, swap: type[ast.cmpop]) -> Callable[[ast.AST], None]:
    def apply(node: ast.AST) -> None:
        node.ops[k] = swap()  # type: ignore[attr-defined]
    return apply


def _describe_binop(node: ast.AST) -> tuple[str, str]:
    mutated = copy.deepcopy(node)
    _apply_binop(mutated)
    return _text(node), _text(mutated)


def _apply_binop(node: ast.AST) -> None:
    node.op = _BINOP_SWAPS[type(node.op)]()  # type: ignore[attr-defined]


def _describe_boolop(node: ast.AST) -> tuple[str, str]:
    mutated = copy.deepcopy(node)
    _apply_boolop(mutated)
    return _text(node), _text(mutated)


def _apply_boolop(node: ast.AST) -> None:
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()  # type: ignore[attr-defined]


def _describe_int(delta: int) -> Callable[[ast.AST], tuple[str, str]]:
    return lambda node: (_text(node), repr(node.value + delta))  # type: ignore[attr-defined]


def _apply_int(delta: int) -> Callable[[ast.AST], ast.AST]:
    return lambda node: ast.copy_location(ast.Constant(node.value + delta), node)  # type: ignore[attr-defined]
