"""What every kernel owner defined in Python shares, whatever its language (zerojit.Kernel for
CUDA C++; zerojit.TritonKernel and zerojit.CuteKernel through _function_owner): one instance per
class, a unique name, a frozen dataclass Key whose fields the C++ core holds, keys interned into
the core's slots, the warmup space expanded through the same dispatch the calls use, compile /
identity / counters.
"""

import dataclasses
import typing

from zerojit import _core
from zerojit.runtime.errors import Error, InvalidArgument
from zerojit.runtime.types import DType

__all__ = ["KernelOwner"]

_FIELD_KINDS = {bool: "bool", int: "int", str: "str", DType: "dtype"}


class KernelOwner:
    """Base of the Python kernel owners; a language's owner defines ``_intern(key, fields)``
    (and may extend ``_setup_owner``)."""

    name: str = ""
    Key: type = None

    _instances = {}  # class -> its instance
    _names = {}  # kernel name -> class (unique across every language)

    def __new__(cls):
        instance = KernelOwner._instances.get(cls)
        if instance is None:
            instance = super().__new__(cls)
            instance._setup()
            KernelOwner._instances[cls] = instance
        return instance

    @classmethod
    def instance(cls):
        return cls()

    @staticmethod
    def named(name):
        """The owner instance registered under a kernel name, or None."""
        cls = KernelOwner._names.get(name)
        return None if cls is None else KernelOwner._instances.get(cls)

    def _setup(self):
        cls = type(self)
        name = self.name
        if not isinstance(name, str) or not name:
            raise InvalidArgument(
                f"kernel class {cls.__name__}: set `name` to a non-empty str", cls.__name__, "name"
            )
        other = KernelOwner._names.get(name)
        if other is not None and other is not cls:
            raise InvalidArgument(
                f"kernel {name}: the name is taken by {other.__qualname__}; kernel names are "
                "unique in a process",
                name,
                "name",
            )
        key = self.Key
        if not (
            dataclasses.is_dataclass(key)
            and isinstance(key, type)
            and key.__dataclass_params__.frozen
        ):
            raise InvalidArgument(f"kernel {name}: Key must be a frozen dataclass", name, "Key")
        hints = typing.get_type_hints(key) if not _has_string_annotations(key) else {}
        self._fields = tuple(
            (f.name, _field_kind(name, f.name, hints.get(f.name, f.type)))
            for f in dataclasses.fields(key)
        )
        self._core = _core.dynamic_kernel(name)
        self._slots = {}
        self._keys = {}  # slot -> key
        self._setup_owner()
        if self.has_fallbacks():
            # Asked by the call path only on a miss in the monitor's fallback mode.
            _core.kernel_call_set_fallback(self._launcher, self._fallback_resolve)
        KernelOwner._names[name] = cls

    def _setup_owner(self):
        """A language's own checks and state, once per class (after the name and Key)."""

    def _registered(self):
        """zerojit.register took this kernel (warmup comes later, typically after the model is
        built)."""

    def _prestart_compiler(self, arch):
        """Warmup is about to compile for `arch`: a language whose compiler takes long to start
        (a worker interpreter importing it) may start it now."""

    def _intern(self, key, fields):
        """Interns `key` (its fields as the core takes them) into the core; returns the slot."""
        raise NotImplementedError

    # --- What the owner writes ----------------------------------------------------------------
    def dispatch(self, *descriptors):
        raise NotImplementedError(f"kernel {self.name}: define dispatch()")

    def warmup_space(self):
        return None

    def fallback(self, key):
        """A covering key for ``key`` (its program serves every call ``key`` accepts, less
        specialized), or None. Warmup warms the fallback of every key of the space; in the
        monitor's fallback mode a call whose key misses launches the warmed fallback at once
        while the key compiles in the background."""
        return None

    # --- What the base provides ----------------------------------------------------------------
    def has_fallbacks(self):
        """Whether the owner declares fallback(key)."""
        return type(self).fallback is not KernelOwner.fallback

    def fallback_key(self, key):
        """The owner's fallback for ``key``, checked; None when it has none or names the key
        itself (a fallback never falls back again, so nothing can loop)."""
        if not self.has_fallbacks():
            return None
        fallback = self.fallback(key)
        if fallback is None or fallback == key:
            return None
        self._check_key_type(fallback, "fallback", " or None")
        return fallback

    def _check_key_type(self, value, method, alternatives=""):
        """Refuses what ``method`` returned where a Key was due, naming the method."""
        if type(value) is not self.Key:
            raise InvalidArgument(
                f"kernel {self.name}: {method}() returned {type(value).__name__}, not "
                f"{self.Key.__name__}{alternatives}",
                self.name,
                "Key" if method == "dispatch" else method,
            )

    def fallback_refusal(self, key, fallback, point=None):
        """Why ``fallback`` would refuse a call ``key`` accepts, or None: the two programs'
        argument specs (the language's packer), then, at a warmup space's point, the checks of
        the owner's geometry (a language's owner extends ``_point_refusal``)."""
        why = _core.kernel_call_covers(self._launcher, self.slot(key), self.slot(fallback))
        if why:
            return why
        return None if point is None else self._point_refusal(key, fallback, point)

    def _point_refusal(self, key, fallback, point):
        return None

    def _fallback_resolve(self, slot, args, options=None):
        """(slot, geometry) of the fallback that serves a call whose key (``slot``) missed,
        or None; the call path asks it only then."""
        fallback = self.fallback_key(self._keys[slot])
        if fallback is None:
            return None
        return self._resolve_key(fallback, args, options)

    def _resolve_key(self, key, args, options=None):
        """(slot, geometry) of a call launched with ``key`` (its language's owner)."""
        raise NotImplementedError

    def slot(self, key):
        """The core's handle of ``key``, interning it (and building its program) on first use."""
        slot = self._slots.get(key)
        if slot is not None:
            return slot
        self._check_key_type(key, "dispatch")
        fields = []
        for field, kind in self._fields:
            value = getattr(key, field)
            fields.append((field, kind, _field_value(self.name, field, kind, value)))
        slot = self._intern(key, fields)
        self._slots[key] = slot
        self._keys[slot] = key
        return slot

    def key_of(self, entry):
        """The Key a manifest names: ``entry`` is an entry of ``zerojit.kernel_manifest()`` or
        of the tool's ``keys --json`` (``{"kernel", "key", ...}``), or its ``"key"`` dict of
        field -> value (a DType field as its name, ``"bf16"``). The inverse of the manifest:
        ``kernel.program(kernel.key_of(entry))`` is the program warmup compiles for it."""
        name = self.name
        fields = entry
        if isinstance(entry, dict) and "key" in entry and isinstance(entry["key"], dict):
            if entry.get("kernel", name) != name:
                raise InvalidArgument(
                    f"kernel {name}: the manifest entry is kernel {entry['kernel']}'s",
                    name,
                    "kernel",
                )
            fields = entry["key"]
        if not isinstance(fields, dict):
            raise InvalidArgument(
                f"kernel {name}: key_of() takes a manifest entry or its key's dict of fields, "
                f"got {type(entry).__name__}",
                name,
                "key",
            )
        declared = [field for field, _ in self._fields]
        for field in fields:
            if field not in declared:
                raise InvalidArgument(
                    f"kernel {name}: the key has no field '{field}' ({', '.join(declared)})",
                    name,
                    str(field),
                )
        values = {}
        for field, kind in self._fields:
            if field not in fields:
                raise InvalidArgument(
                    f"kernel {name}: the manifest's key gives no field '{field}'", name, field
                )
            value = _field_value(name, field, kind, fields[field])
            values[field] = DType(value) if kind == "dtype" else value
        return self.Key(**values)

    def key_text(self, key):
        """The key as the core prints it: ``"dtype=f32, vector_width=4"``."""
        return self._core.slot_text(self.slot(key))

    def identity(self, key, arch="sm_90a"):
        """The key's program identity on ``arch`` (32 hex digits), as the disk cache names it."""
        return self._core.identity(self.slot(key), arch)

    def compile(self, key, arch="sm_90a"):
        """Compiles one key (memory -> disk cache -> compiler); returns its origin ("compiled",
        "disk" or "memory")."""
        origin, _ = self._core.compile(self.slot(key), arch)
        return origin

    def expand(self, space=None, points=None):
        """The warmup space's keys (dispatch evaluated at every kept point), in first-seen
        order, with its dead axes and point counts. ``points``: a list that receives each kept
        point with its key, as (point, key)."""
        space = space if space is not None else self.warmup_space()
        if space is None:
            raise Error(f"kernel {self.name}: no warmup space (define warmup_space())")
        dispatch = self._dispatch_point
        if points is not None:

            def dispatch(point):
                key = self._dispatch_point(point)
                points.append((point, key))
                return key

        try:
            return space.expand(dispatch)
        except Error as error:
            raise type(error)(f"kernel {self.name}: {error}") from error

    def _dispatch_point(self, point_arguments):
        if isinstance(point_arguments, dict):
            return self.dispatch(**point_arguments)
        return self.dispatch(*point_arguments)

    def counters(self):
        """hits, misses, compiles, disk_loads, loads and runtime_jit of this kernel."""
        return self._core.counters_json()


def _has_string_annotations(key):
    return any(isinstance(f.type, str) for f in dataclasses.fields(key))


def _field_kind(kernel, field, annotation):
    if isinstance(annotation, str):  # from __future__ import annotations
        annotation = {
            "bool": bool,
            "int": int,
            "str": str,
            "DType": DType,
            "zerojit.DType": DType,
        }.get(annotation, annotation)
    kind = _FIELD_KINDS.get(annotation)
    if kind is None:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' has type {annotation!r}; a key field is "
            "an int, bool, str or zerojit.DType",
            kernel,
            field,
        )
    return kind


def _field_value(kernel, field, kind, value):
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str) and not isinstance(value, DType)
    else:
        try:
            value = DType.of(value)
            ok = True
        except ValueError:
            ok = False
        value = value.value if ok else value
    if not ok:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' must be {kind}, got {value!r}", kernel, field
        )
    # What the C++ key holds: a 64-bit int, a UTF-8 string.
    if kind == "int" and not -(2**63) <= value < 2**63:
        raise InvalidArgument(
            f"kernel {kernel}: key field '{field}' must fit in 64 bits, got {value}", kernel, field
        )
    if kind == "str":
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"kernel {kernel}: key field '{field}' must be valid Unicode text (no lone "
                f"surrogates), got {value!r}",
                kernel,
                field,
            ) from None
    return value
