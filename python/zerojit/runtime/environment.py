"""What the module takes from its surroundings: its yes/no environment variables, read by the
library's own reader (src/environment.cpp) so that one rule holds for every variable, and paths,
handed to the library as bytes as the tool gets them."""

import os
import warnings


def flag(name, default):
    """``name``'s value as a bool: unset gives ``default``; empty, 0, false, no or off (any case)
    False; 1, true, yes or on True. Anything else gives ``default``, named in one warning of the
    library's log (once per variable and value), so that a value meant one way is never
    silently taken the other."""
    from zerojit import _core

    return _core.environment_flag(name, bool(default))


def path_bytes(path):
    """A path (str, bytes or os.PathLike) as the core takes it: its bytes, as ``os.fsencode``
    gives them. A path that is not UTF-8 (bytes, or a str holding the surrogate escapes
    ``os.fsdecode`` makes of them) then reaches the library intact, as on the tool's command
    line, where encoding it as UTF-8 text would fail."""
    return os.fsencode(os.fspath(path))


def seconds(name, default):
    """``name``'s value as a positive number of seconds; unset or empty gives ``default``, and
    anything else (a unit, a negative number) ``default`` with a warning naming the variable."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        parsed = float(value)
    except ValueError:
        parsed = -1.0
    if not parsed > 0 or parsed == float("inf"):
        warnings.warn(
            f"zerojit: ignoring {name}={value!r} (expected a positive number of seconds)",
            RuntimeWarning,
            stacklevel=3,
        )
        return default
    return parsed
