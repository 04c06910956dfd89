"""The tests' Triton kernels, registered for warmup at import: the module the tool is given
(`python -m zerojit keys --module triton_registered`)."""

import triton_test_owners

triton_test_owners.register_all()
