"""PyTorch-on-CPU tests of the Python kernel API: descriptors of torch tensors, dispatch from
them, and a kernel exposed as a torch custom op (schema with the mutated argument, fake
implementation under FakeTensor mode, eager calls straight to the kernel). Skipped without
PyTorch."""

import os
import sys
import unittest

try:
    import torch
except ImportError:
    torch = None

import pytorch_nvrtc  # noqa: F401  (before zerojit)
import zerojit
from zerojit import DType, TensorDesc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import user_kernel  # noqa: E402

requires_torch = unittest.skipIf(torch is None, "needs PyTorch")

if torch is not None:

    @zerojit.torch_op("zerojit_test_cpu::axpby", mutates_args=("out",))
    def axpby(
        x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, alpha: float, beta: float
    ) -> None:
        user_kernel.Axpby()(x, y, out, alpha, beta)


@requires_torch
class TorchKernelTest(unittest.TestCase):
    def test_descriptors_of_torch_tensors(self):
        base = torch.zeros(64, 8, dtype=torch.bfloat16)
        desc = TensorDesc.of(base[:, 1:])
        self.assertEqual((desc.dtype, desc.shape, desc.strides), (DType.bf16, (64, 7), (8, 1)))
        self.assertEqual(desc.alignment, min(256, (base.data_ptr() + 2) & -(base.data_ptr() + 2)))
        self.assertIs(DType.of(torch.float8_e4m3fn), DType.e4m3)
        with self.assertRaisesRegex(TypeError, "cannot describe list"):
            TensorDesc.of([1, 2])

    def test_dispatch_from_tensors(self):
        x = torch.zeros(1024, dtype=torch.float32)
        kernel = user_kernel.Axpby()
        descs = [TensorDesc.of(t) for t in (x, x, x)]
        expected = 4 if descs[0].alignment >= 16 else 1
        self.assertEqual(kernel.dispatch(*descs), user_kernel.AxpbyKey(DType.f32, expected))
        odd = [TensorDesc.of(x[1:])] * 3
        self.assertEqual(kernel.dispatch(*odd).vector_width, 1)

    def test_custom_op_schema_and_fake(self):
        op = torch.ops.zerojit_test_cpu.axpby.default
        self.assertRegex(str(op._schema), r"Tensor\(a\d*!\) out")
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            x = torch.empty(16, device="cuda" if torch.cuda.is_available() else "cpu")
            self.assertIsNone(axpby.op(x, x, torch.empty_like(x), 1.0, 2.0))

    def test_eager_call_reaches_the_kernel(self):
        x = torch.zeros(16)
        with self.assertRaisesRegex(zerojit.InvalidArgument, "user.axpby.*'x'.*CUDA tensor"):
            axpby(x, x, torch.empty_like(x), 1.0, 2.0)


if __name__ == "__main__":
    unittest.main()
