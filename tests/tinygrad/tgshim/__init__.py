"""tgshim: tinygrad's Tensor impersonated on top of libtg.so (tgc's C API), for measuring tgc against
tinygrad's own tests. install() swaps the real tinygrad's Tensor for the shim; everything else a test imports
from tinygrad (dtypes, helpers, Device) stays tinygrad's own, pure-Python code."""


def install():
  import tinygrad, tinygrad.tensor
  from .tensor import Tensor
  tinygrad.Tensor = Tensor
  tinygrad.tensor.Tensor = Tensor
  return Tensor
