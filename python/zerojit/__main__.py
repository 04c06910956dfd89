"""``python -m zerojit ...`` (and the ``zerojit`` command pip installs, which runs it): the
zerojit command-line tool in this interpreter, with the families of the ``zerojit`` binary
(DSv4 by default, ``--examples``) and, with ``--module M``, the kernels Python modules register
(Triton's, CuTeDSL's and CUDA C++'s): the same commands, options, exit codes and ``--json``
(docs/TOOL.md). ``ZEROJIT_TOOL`` names another tool binary to run instead (e.g. a project's own
tool built on zerojit::cli)."""

import os
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    explicit = os.environ.get("ZEROJIT_TOOL")
    if explicit:
        os.execv(explicit, [explicit, *argv])
    from zerojit.tool import modules as _cli

    # The console script's name in --help and messages when run as `zerojit`.
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return _cli.run(argv, program="zerojit" if script == "zerojit" else "python -m zerojit")


if __name__ == "__main__":
    sys.exit(main())
