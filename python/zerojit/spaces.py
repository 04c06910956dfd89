"""Warmup spaces for Python kernels: the C++ space primitives (space.hpp), over Python values.

A space is a product of axes, each a list of values; a point is a dict {axis name: value}.
``describe`` turns a point into the arguments of the kernel's dispatch (a dict of keyword
arguments or a tuple of positional ones); warmup evaluates dispatch at every kept point, so
the keys it compiles are by construction the keys the runtime asks for. The odometer order,
the range and advance rules, the bound, the filters and the dead-axis report are the C++
code's own.

    space = (zerojit.Space(lambda p: (TensorDesc.contiguous(p["dtype"], (p["n"],)),))
             .choices("dtype", [DType.f16, DType.f32])
             .advance("n", 1, 1 << 20, zerojit.next_power_of_two))
"""

import typing

from zerojit import _core
from zerojit.runtime.errors import Error

__all__ = ["Space", "Expansion", "next_power_of_two"]


def next_power_of_two(value):
    """The smallest power of two strictly greater than ``value`` (the C++ advance)."""
    return _core.next_power_of_two(int(value))


class Expansion(typing.NamedTuple):
    keys: list  # distinct keys, in first-seen order
    dead_axes: list  # axes of >= 2 values that never change the key
    points: int  # points in the product
    filtered_out: int  # points a filter dropped


class Space:
    """A warmup space. ``describe(point) -> dispatch arguments`` (default: the point itself,
    as keyword arguments). Every method returns the space, so calls chain."""

    def __init__(self, describe=None):
        self._core = _core.Space()
        self._describe = describe if describe is not None else (lambda point: point)

    def choices(self, name, values):
        """An axis over explicit values (any iterable; one that never ends is read up to the
        space's bound and refused)."""
        self._core.choices(str(name), iter(values))
        return self

    def range(self, name, first, last, step=1):
        """Integers first, first + step, ... up to and including last."""
        self._core.range(str(name), int(first), int(last), int(step))
        return self

    def advance(self, name, first, last, next=next_power_of_two):
        """Integers first, next(first), ... while below last, then last itself (so the largest
        runtime value is covered); ``next`` must increase strictly."""
        self._core.advance(str(name), int(first), int(last), lambda v: int(next(v)))
        return self

    def zip(self, names, rows):
        """Rows whose fields vary together: one axis named "a+b+...", each row a tuple."""
        self._core.zip([str(n) for n in names], [tuple(r) for r in rows])
        return self

    def filter(self, name, keep):
        """Drops the points for which ``keep(point)`` is false."""
        self._core.filter(str(name), lambda point: bool(keep(point)))
        return self

    def bound(self, max_points):
        """The largest product (and axis) the space accepts; applies to axes added after it."""
        self._core.bound(int(max_points))
        return self

    @property
    def axis_count(self):
        return self._core.axis_count

    def points(self):
        """Every kept point, in odometer order (last axis fastest)."""
        return self._core.points()

    def arguments(self, point):
        """The dispatch arguments of one point."""
        return self._describe(point)

    def expand(self, dispatch):
        """``dispatch(arguments)`` at every kept point: the distinct keys and the dead axes.
        A point dispatch rejects is a zerojit.Error naming the point, chained to dispatch's
        exception; a KeyboardInterrupt or SystemExit from dispatch is raised as itself."""
        raised = []

        def at_point(point):
            try:
                return dispatch(self._describe(point))
            except BaseException as error:
                raised.append(error)
                raise

        try:
            keys, dead, points, filtered = self._core.expand(at_point)
        except Error as error:
            if raised and not isinstance(raised[-1], Exception):
                raise raised[-1] from None
            if raised:
                raise error from raised[-1]
            raise
        return Expansion(list(keys), list(dead), points, filtered)
