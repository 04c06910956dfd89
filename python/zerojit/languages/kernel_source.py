"""A Python kernel function's source as zerojit identifies it (a ``@triton.jit`` function, a
``@cute.jit`` host function), read without importing anything.

A process that only serves warmed kernels from a pack has no compiler to import (no Triton, no
CuTeDSL), so it cannot import the module that defines the function either. The identity of a
kernel's program therefore comes from the module's source file, parsed with ``ast``: the
function's own text, then, by name, every module-level definition it uses (helper functions,
constants such as ``BLOCK = tl.constexpr(64)``), followed into the modules it imports them from,
transitively. Line numbers take no part: adding a line above a kernel changes nothing (Triton's
own cache key changes with the starting line). Names that resolve into the compilers, PyTorch or
the standard library are left out: their code is covered by the compiler version in the
identity.
"""

import ast
import importlib.util
import os
import sys

from zerojit.runtime.errors import InvalidArgument

__all__ = ["Default", "FunctionSource", "locate", "read"]

# Names from these packages are not followed: the compiler version covers them.
_OPAQUE = (
    "triton",
    "cutlass",
    "cuda",
    "torch",
    "numpy",
    "builtins",
    "math",
    "functools",
    "typing",
    "os",
    "sys",
)
_MAX_SOURCE_BYTES = 4 << 20  # the identity text of one kernel; past it, a config error


class FunctionSource:
    """What the identity and the call path need of a kernel function: its module, its
    qualified name, the module file (for compile workers when the module is ``__main__``), its
    parameters as ``(name, kind)`` (kind "runtime", "constexpr" for ``tl.constexpr`` /
    ``cutlass.Constexpr``, "stream" for a ``cuda.CUstream``; a method's ``self`` left out), the
    identity text, and for a method (``Class.method``) its name, else None.

    ``annotations``: each annotated parameter's annotation as source text (``"tl.int32"``,
    ``"'*fp32'"``); ``defaults``: each parameter with a default -> ``Default``. Both are read
    from the source, as the rest, so that a process without the compiler has them too."""

    def __init__(
        self, module, qualname, file, params, text, annotations=None, defaults=None, method=None
    ):
        self.module = module
        self.qualname = qualname
        self.file = file
        self.params = params
        self.text = text
        self.annotations = dict(annotations or {})
        self.defaults = dict(defaults or {})
        self.method = method

    @property
    def runtime_params(self):
        return tuple(name for name, kind in self.params if kind == "runtime")

    @property
    def constexpr_params(self):
        return tuple(name for name, kind in self.params if kind == "constexpr")

    @property
    def stream_params(self):
        return tuple(name for name, kind in self.params if kind == "stream")


class Default:
    """A parameter's default as the source writes it: ``readable`` when its value is known
    without importing the module (a literal, ``tl.constexpr(<literal>)``, or a module-level
    name bound to one of those), ``text`` as written."""

    def __init__(self, readable, value, text):
        self.readable = readable
        self.value = value
        self.text = text

    def __repr__(self):
        return f"Default({self.text})"


def locate(fn, kernel):
    """(module, qualname) of a kernel function given as the (decorated) function or as a
    string ``"package.module:function"``."""
    if isinstance(fn, str):
        module, sep, qualname = fn.partition(":")
        if not sep or not module or not qualname:
            raise InvalidArgument(
                f"kernel {kernel}: fn '{fn}' must be 'package.module:function'", kernel, "fn"
            )
        return module, qualname
    inner = getattr(fn, "fn", None)  # triton.JITFunction wraps the Python function
    target = inner if inner is not None and callable(inner) else fn
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not module or not qualname:
        raise InvalidArgument(
            f"kernel {kernel}: fn must be the kernel's function or 'module:function', got "
            f"{type(fn).__name__}",
            kernel,
            "fn",
        )
    return module, qualname


def read(module, qualname, kernel, methods=False):
    """The FunctionSource of ``module:qualname``, from the module's file. With ``methods``, the
    qualname may also be ``Class.method``, an instance method of a top-level class: its
    parameters are the method's but ``self``, and its identity is the whole class (its
    constructor and every method configure what the entry traces)."""
    owner, dot, method = qualname.partition(".")
    if "<" in qualname or (dot and (not methods or "." in method)):
        raise InvalidArgument(
            f"kernel {kernel}: the function {module}:{qualname} must be defined at the "
            "top level of its module (compile workers import it by name)"
            + ("; or be a method of a top-level class, 'module:Class.method'" if methods else ""),
            kernel,
            "fn",
        )
    file = _module_file(module)
    if file is None:
        raise InvalidArgument(
            f"kernel {kernel}: cannot find the source of module '{module}' (the kernel function's "
            "module must be a .py file on sys.path)",
            kernel,
            "fn",
        )
    tree = _parse(file, kernel)
    found = _top_level(tree).get(owner)
    if dot and isinstance(found, ast.ClassDef):
        found = next(
            (
                node
                for node in found.body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == method
            ),
            None,
        )
        what = f"class '{owner}' with a method '{method}'"
    else:
        what = f"function '{qualname}'"
    if not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise InvalidArgument(
            f"kernel {kernel}: module '{module}' ({file}) defines no top-level {what}",
            kernel,
            "fn",
        )
    arguments = _arguments(found)[1 if dot else 0 :]  # a method's self is its object
    params = tuple((arg.arg, _parameter_kind(arg.annotation)) for arg in arguments)
    annotations = {
        arg.arg: ast.unparse(arg.annotation) for arg in arguments if arg.annotation is not None
    }
    text = _Collector(kernel).collect(module, file, tree, owner)
    defaults = {
        name: _default(node, _top_level(tree)) for name, node in _default_nodes(found).items()
    }
    return FunctionSource(
        module, qualname, file, params, text, annotations, defaults, method if dot else None
    )


def _arguments(function):
    args = function.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _default_nodes(function):
    """Parameter name -> the expression of its default."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    out = dict(
        zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults)
    )
    for arg, node in zip(args.kwonlyargs, args.kw_defaults):
        if node is not None:
            out[arg.arg] = node
    return out


def _default(node, names, depth=0):
    """A default's value where the source alone tells it (Default)."""
    text = ast.unparse(node)
    try:
        return Default(True, ast.literal_eval(node), text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    inner = None
    if (
        isinstance(node, ast.Call)
        and _last_name(node.func) == "constexpr"
        and len(node.args) == 1
        and not node.keywords
    ):
        inner = node.args[0]  # tl.constexpr(64)
    elif isinstance(node, ast.Name) and depth < 4:
        bound = names.get(node.id)
        if isinstance(bound, ast.Assign) and [type(t) for t in bound.targets] == [ast.Name]:
            inner = bound.value
        elif isinstance(bound, ast.AnnAssign) and bound.value is not None:
            inner = bound.value
    if inner is not None:
        found = _default(inner, names, depth + 1)
        if found.readable:
            return Default(True, found.value, text)
    return Default(False, None, text)


def _last_name(node):
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _parameter_kind(annotation):
    """ "constexpr" for ``tl.constexpr``, ``triton.language.constexpr``, ``cutlass.Constexpr``
    (and the bare or string forms), "stream" for ``cuda.CUstream``, else "runtime"."""
    name = None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        name = annotation.value.split(".")[-1]
    elif isinstance(annotation, ast.Attribute):
        name = annotation.attr
    elif isinstance(annotation, ast.Name):
        name = annotation.id
    elif isinstance(annotation, ast.Subscript):  # cutlass.Constexpr[int]
        return _parameter_kind(annotation.value)
    if name in ("constexpr", "Constexpr"):
        return "constexpr"
    return "stream" if name == "CUstream" else "runtime"


def _parse(file, kernel):
    try:
        with open(file, "rb") as handle:
            data = handle.read(_MAX_SOURCE_BYTES + 1)
        if len(data) > _MAX_SOURCE_BYTES:
            raise InvalidArgument(
                f"kernel {kernel}: {file} is larger than {_MAX_SOURCE_BYTES} bytes", kernel, "fn"
            )
        return ast.parse(data, filename=file)
    except (OSError, SyntaxError, ValueError) as error:
        raise InvalidArgument(
            f"kernel {kernel}: cannot read {file}: {error}", kernel, "fn"
        ) from error


def _top_level(tree):
    """Module-level names -> the statement that binds them (the last binding wins)."""
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names[leaf.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                names[bound] = node
    return names


def _module_file(module):
    """The .py file of a module, found without importing it (nor its packages)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return _file_of(loaded)
    if module == "__main__":
        return None
    parts = module.split(".")
    top = sys.modules.get(parts[0])
    if top is not None:
        locations, origin = list(getattr(top, "__path__", None) or []), _file_of(top)
    else:
        try:
            spec = importlib.util.find_spec(parts[0])  # a top-level name: nothing is executed
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        locations, origin = list(spec.submodule_search_locations or []), spec.origin
    for part in parts[1:]:
        origin = None
        for location in locations:
            package = os.path.join(location, part, "__init__.py")
            plain = os.path.join(location, part + ".py")
            if os.path.isfile(package):
                origin, locations = package, [os.path.dirname(package)]
                break
            if os.path.isfile(plain):
                origin, locations = plain, []
                break
        if origin is None:
            return None
    return origin if origin and origin.endswith(".py") else None


def _file_of(module):
    file = getattr(module, "__file__", None) if module is not None else None
    return file if file and file.endswith(".py") and os.path.isfile(file) else None


def _resolve_relative(module, file, level, name):
    """The absolute module an ``ImportFrom`` of ``module`` (whose file is ``file``) names."""
    if level == 0:
        return name
    package_parts = module.split(".")
    is_package = os.path.basename(file) == "__init__.py"
    if not is_package:
        package_parts = package_parts[:-1]
    if level > 1:
        package_parts = package_parts[: len(package_parts) - (level - 1)]
    base = ".".join(package_parts)
    return f"{base}.{name}" if name and base else (name or base)


class _Collector:
    """Collects the source of a function and of every definition it reaches, by name."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.parts = {}  # (module, name) -> text
        self.trees = {}  # module -> (file, tree, top-level names, source text) or None

    def collect(self, module, file, tree, name):
        self.trees[module] = (file, tree, _top_level(tree), _read_text(file))
        self._visit(module, name)
        return "".join(f"# {key[0]}:{key[1]}\n{text}\n" for key, text in sorted(self.parts.items()))

    def _module(self, module):
        if module in self.trees:
            return self.trees[module]
        file = None if module.split(".")[0] in _OPAQUE else _module_file(module)
        if file is None:
            self.trees[module] = None
            return None
        tree = _parse(file, self.kernel)
        self.trees[module] = (file, tree, _top_level(tree), _read_text(file))
        return self.trees[module]

    def _visit(self, module, name):
        if (module, name) in self.parts:
            return
        loaded = self._module(module)
        if loaded is None:
            return
        file, _, names, source = loaded
        node = names.get(name)
        if node is None:
            return
        text = ast.get_source_segment(source, node) or ast.dump(node)
        self.parts[(module, name)] = text
        if sum(len(t) for t in self.parts.values()) > _MAX_SOURCE_BYTES:
            raise InvalidArgument(
                f"kernel {self.kernel}: the kernel function's sources exceed "
                f"{_MAX_SOURCE_BYTES} bytes",
                self.kernel,
                "fn",
            )
        if isinstance(node, ast.ImportFrom):
            target = _resolve_relative(module, file, node.level, node.module or "")
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    if self._module(f"{target}.{alias.name}") is not None:
                        continue  # a submodule: its attributes are followed where used
                    self._visit(target, alias.name)
            return
        if isinstance(node, ast.Import):
            return  # attributes of the module are followed where they are used
        for used, attribute in _used_names(node):
            bound = names.get(used)
            if isinstance(bound, ast.Import) and attribute is not None:
                for alias in bound.names:
                    if (alias.asname or alias.name.split(".")[0]) == used:
                        self._visit(alias.name if alias.asname else used, attribute)
            elif isinstance(bound, ast.ImportFrom) and attribute is not None:
                target = _resolve_relative(module, file, bound.level, bound.module or "")
                for alias in bound.names:
                    if (alias.asname or alias.name) == used:
                        self._visit(f"{target}.{alias.name}", attribute)
                self._visit(module, used)
            else:
                self._visit(module, used)


def _read_text(file):
    with open(file, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _used_names(node):
    """(name, attribute or None) for every name the node loads: ``helper`` gives
    ("helper", None), ``mod.helper`` gives ("mod", "helper")."""
    out = []
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            out.append((child.value.id, child.attr))
        elif isinstance(child, ast.Name):
            out.append((child.id, None))
    return out
