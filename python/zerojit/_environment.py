"""The module's yes/no environment variables, read by the library's rule (src/environment.cpp)."""

import os
import warnings

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def flag(name, default):
    """``name``'s value as a bool: unset or empty gives ``default``; 1, true, yes, on (any case)
    True; 0, false, no, off False. Anything else gives ``default`` with a warning naming the
    variable, so that a value meant one way is never silently taken the other."""
    value = os.environ.get(name, "")
    if value == "":
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    warnings.warn(
        f"zerojit: ignoring {name}={value!r} (expected 1, true, yes or on to enable; "
        f"0, false, no or off to disable)",
        RuntimeWarning,
        stacklevel=3,
    )
    return default


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
