"""``python -m zerojit ...``: the zerojit command-line tool (the ``zerojit`` executable pip
installs next to the interpreter's scripts when asked to build it: pyproject.toml), with the
same arguments; with ``--module M`` (the kernels Python modules register, Triton's and
CuTeDSL's among them) the same tool runs in this interpreter (zerojit.tool.modules)."""

import os
import shutil
import sys
import sysconfig


def _tool():
    """The installed tool: $ZEROJIT_TOOL, the interpreter's scripts folder, then PATH."""
    explicit = os.environ.get("ZEROJIT_TOOL")
    if explicit:
        return explicit
    for scheme_path in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scheme_path, "zerojit")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("zerojit")


def _names_modules(argv):
    for argument in argv:
        if argument == "--":
            return False
        if argument == "--module" or argument.startswith("--module="):
            return True
    return False


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if _names_modules(argv):
        from zerojit.tool import modules as _cli

        return _cli.run(argv)
    tool = _tool()
    if tool is None:
        sys.stderr.write(
            "zerojit: the command-line tool is not installed (pip installs it as the `zerojit` "
            "script with `pip install . -Ccmake.define.ZEROJIT_BUILD_CLI=ON "
            "-Ccmake.define.ZEROJIT_BUILD_TOOL=ON`; a CMake build has it at "
            "<build>/tools/zerojit; or set ZEROJIT_TOOL)\n"
        )
        return 2
    os.execv(tool, [tool, *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
