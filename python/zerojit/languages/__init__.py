"""The kernel languages of zerojit's Python side, one row each: a language is one folder here
(its owner base, the compile its workers run, and the guard over compiles of kernels zerojit
does not own), as it is one folder of the C++ core (src/languages/: its entry kind and argument
packer). docs/ADDING_A_KERNEL.md, "Adding a kernel language", lists what a new one takes."""

import dataclasses
import os
import typing

__all__ = ["Language", "LANGUAGES", "row", "row_of_package"]

_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Language:
    name: str  # the core's name of the language (the entry kind's)
    owner: str  # the module of its owner base (zerojit.Kernel, TritonKernel, CuteKernel)
    # The file whose compile(request, worker) runs in a compile worker, which loads it without
    # importing zerojit (zerojit.languages.compile_worker); None: the core compiles (NVRTC).
    compile_file: typing.Optional[str]
    guard: typing.Optional[str]  # the module whose install_when_imported() guards the compiler
    preload: typing.Tuple[str, ...]  # what the workers' zygote imports once
    compiler: str  # the compiler, as messages name it
    install: str  # how to install the compiler


LANGUAGES = (
    Language("cuda", "zerojit.languages.cuda.owner", None, None, (), "NVRTC", ""),
    Language(
        "triton",
        "zerojit.languages.triton.owner",
        os.path.join(_HERE, "triton", "compile.py"),
        "zerojit.languages.triton.guard",
        ("triton", "triton.compiler", "triton.backends.nvidia.compiler"),
        "Triton",
        "pip install triton==3.6.0",
    ),
    Language(
        "cutedsl",
        "zerojit.languages.cutedsl.owner",
        os.path.join(_HERE, "cutedsl", "compile.py"),
        "zerojit.languages.cutedsl.guard",
        ("cutlass", "cutlass.cute", "cutlass.cute.runtime"),
        "CuTeDSL",
        "pip install nvidia-cutlass-dsl==4.8.1",
    ),
)


def row(name):
    """The row of a language by its name, or None."""
    return next((language for language in LANGUAGES if language.name == name), None)


def row_of_package(package):
    """The row of the language whose compiler is imported as `package`, or None."""
    return next((language for language in LANGUAGES if package in language.preload), None)
