"""The mutants of bench/mutate.py: where they are in a module's AST, and how a forked child
swaps one into the imported code (a function's code object, or a module or class-level
statement run again where it lives)."""

from __future__ import annotations

import ast
import copy
import importlib.machinery
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FLIPPED = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
           ast.Is: ast.IsNot, ast.IsNot: ast.Is}
# Boundary flips catch off-by-one rules that the negations above cannot.
BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


@dataclass
class Mutant:
    index: int  # position of the node in ast.walk order
    op: str  # compare | boundary | constant | return | boolop | not
    line: int
    stmt_lines: tuple[int, int]  # the innermost statement around the node
    scope: tuple[str, ...]  # qualname parts of the enclosing function or class ("" = module)
    scope_kind: str  # function | module | class
    original: str
    mutated: str
    status: str = "not run"
    tests: list[str] = field(default_factory=list)
    binds: tuple[str, ...] = ()  # names a module or class-level statement assigns


def module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return "streamtap." + ".".join(parts)


# -- finding mutants ---------------------------------------------------------------------------
def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _skipped(node: ast.AST, parents: dict) -> bool:
    """Docstrings, annotations, default arguments and decorators are not mutated: the first two
    never run, the last two are evaluated once at import, out of reach of a code swap."""
    child = node
    while child in parents:
        parent = parents[child]
        if isinstance(parent, ast.Expr) and isinstance(child, ast.Constant):
            return True
        if isinstance(parent, (ast.arg, ast.AnnAssign)) and child is parent.annotation:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                child is parent.returns or child in parent.decorator_list):
            return True
        if isinstance(parent, ast.ClassDef) and child in parent.decorator_list:
            return True
        if isinstance(parent, ast.arguments):
            return True
        if isinstance(parent, ast.ClassDef) and isinstance(child, ast.AnnAssign):
            return True  # a dataclass field default lives in a generated __init__
        child = parent
    return False


def _where(node: ast.AST, parents: dict) -> tuple[tuple[str, ...], str, tuple[int, int]]:
    stmt = node
    while not isinstance(stmt, ast.stmt):
        stmt = parents[stmt]
    chain, outer_def = [], None
    child = node
    while child in parents:
        parent = parents[child]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            chain.append(parent)
        child = parent
    chain.reverse()  # outermost first
    scope: list[str] = []
    for item in chain:
        scope.append(item.name)
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            outer_def = item
            break
    kind = "function" if outer_def else ("class" if scope else "module")
    return tuple(scope), kind, (stmt.lineno, stmt.end_lineno or stmt.lineno)


def _text(node: ast.AST, limit: int = 90) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _variants(node: ast.AST) -> list[tuple[str, callable]]:
    """(op, apply) pairs for one node; apply mutates the node in place and returns the node
    whose text shows the change."""
    out: list[tuple[str, callable]] = []
    if isinstance(node, ast.Compare):
        for i, cmp in enumerate(node.ops):
            for op, table in (("compare", FLIPPED), ("boundary", BOUNDARY)):
                if type(cmp) in table:
                    def apply(n, i=i, table=table):
                        n.ops[i] = table[type(n.ops[i])]()
                        return n
                    out.append((op, apply))
    elif isinstance(node, ast.Constant) and not isinstance(node.value, (bytes, type(None))):
        value = node.value
        if isinstance(value, bool):
            new = not value
        elif isinstance(value, (int, float)):
            new = value + 1
        elif isinstance(value, str):
            new = "XX" + value + "XX"
        else:
            return out

        def apply(n, new=new):
            n.value = new
            return n
        out.append(("constant", apply))
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        def apply(n):
            n.value = None
            return n
        out.append(("return", apply))
    elif isinstance(node, ast.BoolOp):
        def apply(n):
            n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
            return n
        out.append(("boolop", apply))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not", None))  # replaced by its operand in the parent; see _mutate
    return out


def find_mutants(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    parents = _parents(tree)
    mutants: list[Mutant] = []
    for index, node in enumerate(ast.walk(tree)):
        if _skipped(node, parents):
            continue
        for variant, (op, apply) in enumerate(_variants(node)):
            scope, kind, lines = _where(node, parents)
            before = _text(node)
            after = _text(node.operand if op == "not" else apply(copy.deepcopy(node)))
            binds = ()
            if kind != "function":
                stmt = next(s for s in ast.walk(tree) if isinstance(s, ast.stmt)
                            and (s.lineno, s.end_lineno) == lines)
                binds = tuple(sorted({t.id for t in ast.walk(stmt) if isinstance(t, ast.Name)
                                      and isinstance(t.ctx, ast.Store)}))
                if "__slots__" in binds:
                    continue  # fixed when the class is made; no swap can reach it
            mutants.append(Mutant(index * 8 + variant, op, node.lineno, lines, scope, kind,
                                  before, after, binds=binds))
    return mutants


def uses(source: str, names: tuple[str, ...]) -> set[int]:
    """Lines of the statements that read one of `names` (as a name or an attribute): the lines
    whose tests see a module or class-level constant, which runs only at import."""
    tree = ast.parse(source)
    parents = _parents(tree)
    found: set[int] = set()
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else (
            node.attr if isinstance(node, ast.Attribute) else None)
        if name in names:
            stmt = node
            while not isinstance(stmt, ast.stmt):
                stmt = parents[stmt]
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            found.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return found


def _mutate(tree: ast.Module, key: int, variant: int | None = None) -> ast.AST:
    """Apply mutant `key` (node index * 8 + variant) to `tree`; return the changed node."""
    if variant is None:
        key, variant = divmod(key, 8)
    node = list(ast.walk(tree))[key]
    op, apply = _variants(node)[variant]
    if op == "not":
        return _drop_not(tree, node)
    return apply(node)


def _drop_not(tree: ast.AST, target: ast.UnaryOp) -> ast.AST:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, name, target.operand)
                return target.operand
            if isinstance(value, list) and any(item is target for item in value):
                value[[id(item) for item in value].index(id(target))] = target.operand
                return target.operand
    raise LookupError("`not` without a parent")


# -- applying a mutant inside the child ---------------------------------------------------------
def _live_function(module, scope: tuple[str, ...]):
    obj = module
    for name in scope:
        obj = (vars(obj) if not inspect.ismodule(obj) else obj.__dict__)[name]
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
    return obj


def _find_code(code, qualname: str):
    for const in code.co_consts:
        if hasattr(const, "co_qualname"):
            if const.co_qualname == qualname:
                return const
            found = _find_code(const, qualname)
            if found is not None:
                return found
    return None


class _MutatedLoader(importlib.machinery.SourceFileLoader):
    """Loads one module from a mutated code object instead of its file."""

    def __init__(self, fullname: str, path: str, code):
        super().__init__(fullname, path)
        self._code = code

    def get_code(self, fullname):
        return self._code


class _MutatedFinder:
    def __init__(self, fullname: str, path: str, code):
        self.fullname, self.path, self.code = fullname, path, code

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname:
            return None
        loader = _MutatedLoader(fullname, self.path, self.code)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


def import_mutated(source: str, path: str, mutant: Mutant) -> None:
    """A module or class-level mutant, in place before anything reads it: every `streamtap` and
    test module is forgotten, and the next import of the mutated module runs the mutated code.

    Swapping the statement in after import (what `apply_mutant` does for functions) reaches no
    one who already read the name: a constant copied by `from m import NAME`, compiled into
    another module-level value (a regex built from a table) or bound as a default argument."""
    tree = ast.parse(source)
    _mutate(tree, mutant.index)
    ast.fix_missing_locations(tree)
    file = str(REPO / path)
    code = compile(tree, file, "exec")
    for name in list(sys.modules):
        if name.split(".")[0] in ("streamtap", "tests"):
            del sys.modules[name]
    sys.meta_path.insert(0, _MutatedFinder(module_name(path), file, code))


def import_time(mutant: Mutant) -> bool:
    return mutant.scope_kind != "function"


def readers(source: str, names: tuple[str, ...]) -> tuple[set[str], set[int]]:
    """What a module or class-level value flows into at import: the closure of the names bound
    by statements that read `names` (a regex compiled from a table), with the functions whose
    defaults or decorators read one of them; returns (names, body lines of those functions)."""
    tree = ast.parse(source)
    outer = [stmt for stmt in tree.body]
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            outer.extend(stmt.body)
    found, lines = set(names), set()
    changed = True
    while changed:
        changed = False
        for stmt in outer:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                heads = list(getattr(stmt, "decorator_list", []))
                if not isinstance(stmt, ast.ClassDef):
                    heads += stmt.args.defaults + [d for d in stmt.args.kw_defaults if d]
                read = {n.id for head in heads for n in ast.walk(head) if isinstance(n, ast.Name)}
                bound = {stmt.name}
                if not isinstance(stmt, ast.ClassDef) and read & found:
                    lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            else:
                read = {n.id for n in ast.walk(stmt)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                bound = {n.id for n in ast.walk(stmt)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if read & found and not bound <= found:
                found |= bound
                changed = True
    return found, lines


def apply_mutant(module, source: str, path: str, mutant: Mutant) -> None:
    tree = ast.parse(source)
    _mutate(tree, mutant.index)
    ast.fix_missing_locations(tree)
    if mutant.scope_kind == "function":
        code = compile(tree, str(REPO / path), "exec")
        new = _find_code(code, ".".join(mutant.scope))
        _live_function(module, mutant.scope).__code__ = new
        return
    # A module or class-level statement: run the mutated statement where it lives.
    stmt = next(s for s in ast.walk(tree) if isinstance(s, ast.stmt)
                and (s.lineno, s.end_lineno) == mutant.stmt_lines)
    target = module.__dict__
    if mutant.scope_kind == "class":
        cls = _live_function(module, mutant.scope)
        namespace = dict(module.__dict__)
        exec(compile(ast.Module([stmt], []), str(REPO / path), "exec"), namespace)
        for name in {t.id for t in ast.walk(stmt) if isinstance(t, ast.Name)
                     and isinstance(t.ctx, ast.Store)}:
            setattr(cls, name, namespace[name])
        return
    exec(compile(ast.Module([stmt], []), str(REPO / path), "exec"), target)
