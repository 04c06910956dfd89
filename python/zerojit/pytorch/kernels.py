"""A Python kernel as a PyTorch custom op, with one decorator.

    @zerojit.torch_op("mylib::axpby", mutates_args=("out",))
    def axpby(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor,
              alpha: float, beta: float) -> None:
        Axpby()(x, y, out, alpha, beta)

registers ``torch.ops.mylib.axpby`` (PyTorch's ``custom_op``: the schema from the type
hints, mutated arguments marked) for CUDA, with a fake implementation, so torch.compile
traces it without a graph break and a captured graph replays it. The decorated name stays
callable: eager calls on plain tensors go straight to the function (zerojit's launch path, no
dispatcher), traced calls go through ``torch.ops``. An op that returns tensors needs ``fake``
(a function of the same arguments returning empty tensors of the right shapes); a mutating op
that returns None gets a no-op fake.
"""

import functools

__all__ = ["torch_op"]


def torch_op(qualname, *, mutates_args, fake=None, schema=None):
    import torch
    from torch import library as torch_library

    def decorate(function):
        op = torch_library.custom_op(
            qualname, mutates_args=tuple(mutates_args), device_types="cuda", schema=schema
        )(function)
        op.register_fake(fake if fake is not None else (lambda *args, **kwargs: None))

        @functools.wraps(function)
        def call(*args, **kwargs):
            anchor = args[0] if args else None
            traced = torch.compiler.is_dynamo_compiling() or (
                isinstance(anchor, torch.Tensor) and type(anchor) is not torch.Tensor
            )
            return op(*args, **kwargs) if traced else function(*args, **kwargs)

        call.op = op
        return call

    return decorate
