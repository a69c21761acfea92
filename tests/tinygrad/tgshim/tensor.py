"""A tinygrad-like Tensor on top of libtg.so (tg.h), for running tinygrad's test_ops.py against tgc.

Every method maps to tg_* calls named in its @maps(...) entry (methods.py reads that table). A method
whose tg_* function is not in the loaded library raises Missing("tg_xxx"); a tinygrad keyword or argument
form tg.h has no way to express raises Missing("<method> <form>"); a method the shim has no entry for
raises Missing("Tensor.<name>") -- unless the library has tg_<name>, which is then bound generically from
its tg.h prototype (_auto: elementwise unary/binary/_scalar forms, axis and keepdim arguments, tg_status
functions with tg_tensor ** outputs).

The shim converts Python forms the way a C user porting tinygrad code would: python scalars become the
_scalar / reflected _scalar forms (or a scalar tensor of tinygrad's weak dtype where tg.h has no scalar
form and the op is commutative or a comparison), tuples become arrays, None axes TG_ALL. It does not
compose missing ops out of other ops.
"""
import ctypes, inspect, math, sys
import numpy as np
from . import lib as L
from .lib import Missing, OutOfScope, Signature, TGError, fn, has

from tinygrad.dtype import dtypes, DType, to_dtype  # the real tinygrad's dtype module (pure python)
import tinygrad.tensor as _real_tensor
_REAL = _real_tensor.Tensor   # tinygrad's own class (install() swaps it out later): its signatures and defaults

TG_ALL = L.HDR.macros.get("TG_ALL", 0x7fffffff)
TG_END = (1 << 63) - 1

# ---- dtypes ---------------------------------------------------------------------------------------------
_TG_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64"]
_TO_TG = {getattr(dtypes, n): i for i, n in enumerate(_TG_DTYPES)}
_FROM_TG = {i: getattr(dtypes, n) for i, n in enumerate(_TG_DTYPES)}
_NP = {0: np.bool_, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.uint8, 6: np.uint16, 7: np.uint32,
       8: np.uint64, 9: np.float16, 10: np.uint16, 11: np.float32, 12: np.float64}


def tg_dtype(dt):
  if dt is None: return None
  if isinstance(dt, str): dt = to_dtype(dt)
  if isinstance(dt, DType):
    for weak, strong in ((getattr(dtypes, "weakint", None), dtypes.int32), (getattr(dtypes, "weakfloat", None), dtypes.float32)):
      if weak is not None and dt == weak: dt = strong
    if dt in _TO_TG: return _TO_TG[dt]
    raise Missing(f"dtype {dt}")
  try:
    return _TO_TG[to_dtype(np.dtype(dt).name)]
  except Exception:
    raise Missing(f"dtype {dt!r}")


def _is_float(tdt): return tdt in (9, 10, 11, 12)
def _is_int(tdt): return 1 <= tdt <= 8


# ---- the mapping table: tinygrad Tensor method -> the tg_* functions it uses ---------------------------
MAPS = {}      # method name -> (tuple of tg names, note)


def maps(*tg_names, name=None, note=""):
  def deco(f):
    MAPS[name or f.__name__] = (tg_names, note)
    return f
  return deco


# ---- helpers ------------------------------------------------------------------------------------------
def _i64(seq): seq = list(seq); return (ctypes.c_int64 * max(1, len(seq)))(*[int(s) for s in seq])
def _i32(seq): seq = list(seq); return (ctypes.c_int * max(1, len(seq)))(*[int(s) for s in seq])


def _chk(name, h):
  if not h: raise TGError(f"{name}: {L.err()}")
  return Tensor._own(h)


def call(name, *args):
  """a tg_* call returning a new tensor"""
  return _chk(name, fn(name)(*args))


def status(name, *args):
  st = fn(name)(*args)
  if st != 0: raise TGError(f"{name}: {L.err()}")


def _shape_arg(args):
  """tinygrad's *shape forms: (2, 3), ((2, 3),), ([2, 3],)"""
  if len(args) == 1 and isinstance(args[0], (tuple, list)): args = tuple(args[0])
  if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in args):
    raise TGError(f"bad shape {args}")
  shape = tuple(int(s) for s in args)
  if any(s < 0 for s in shape): raise TGError(f"negative dimension in {shape}")
  return shape


def _axes(axis, ndim=None):
  """(naxes, int array) for an axis argument: None -> every axis (naxes 0), int, tuple"""
  if axis is None: return 0, _i32([])
  if isinstance(axis, int): axis = (axis,)
  axis = tuple(axis)
  if len(axis) == 0: return -1, None      # an empty tuple: reduce nothing (tinygrad keeps the tensor)
  return len(axis), _i32(axis)


def _py_dtype(v):
  if isinstance(v, bool): return 0
  if isinstance(v, int): return 3
  return 11


def _weak_dtype(v, like):
  """the dtype tinygrad's weak python scalar v takes next to tensor `like` (None: standalone)"""
  if like is None: return _py_dtype(v)
  ld = like._dt
  if _is_float(ld) or (_is_int(ld) and isinstance(v, int)): return ld
  return _py_dtype(v)


def _promote(a, b):
  """tinygrad's least upper dtype of two tg dtypes, for the few cases the shim needs (scalar forms)"""
  if a == b: return a
  order = [0, 5, 1, 6, 2, 7, 3, 8, 4, 9, 10, 11, 12]
  if _is_float(a) or _is_float(b):
    fa = a if _is_float(a) else -1
    fb = b if _is_float(b) else -1
    if {fa, fb} == {9, 10}: return 11
    return max(fa, fb)
  return max(a, b, key=order.index)


def _scalar_tensor(dt, v):
  """a 0-d tensor holding v exactly: integers beyond 2^53 do not fit tg_scalar's double, so they are copied"""
  if _is_int(dt) and isinstance(v, int) and abs(v) > 2**53:
    arr = np.array(v).astype(_NP[dt])
    return call("tg_from_data", dt, 0, _i64([]), arr.ctypes.data_as(ctypes.c_void_p), arr.nbytes)
  return call("tg_scalar", dt, float(v))


def _const(v, like=None, dt=None):
  """a python scalar as a 0-d tg tensor of tinygrad's weak dtype next to `like`"""
  if dt is None: dt = _weak_dtype(v, like)
  return _scalar_tensor(dt, v)


def _as_tensor(x, like=None):
  if isinstance(x, Tensor): return x
  if isinstance(x, (bool, int, float)): return _const(x, like)
  if isinstance(x, np.generic): return _const(x.item(), like)
  return Tensor(x)


def _dbl_scalar(name):
  """whether tg function `name` takes its scalar as a double"""
  return L.HDR.protos[name][1][1][1].strip() == "double"


def _scalar_ok(v): return isinstance(v, (bool, int, float, np.generic)) and not isinstance(v, Tensor)


def _flat_tensors(first, rest):
  """tinygrad's argfix: Tensor.stack(a, b), Tensor.stack((a, b)), a.stack(b, c)"""
  if isinstance(first, (list, tuple)):
    if rest: raise TGError("a sequence of tensors, or tensors, not both")
    out = list(first)
  else: out = [first] + list(rest)
  if not all(isinstance(t, Tensor) for t in out): raise TGError("expected tensors")
  return out


class _Meta(type):
  def __getattr__(cls, name):
    if name.startswith("__"): raise AttributeError(name)
    return _unmapped(name, None)


def _unmapped(name, inst):
  if name in OUT_OF_SCOPE: raise OutOfScope(f"Tensor.{name}: {OUT_OF_SCOPE[name]}")
  if has("tg_" + name):
    def bound(*args, **kw):
      if inst is None: return _auto(name, args[0], *args[1:], **kw)
      return _auto(name, inst, *args, **kw)
    return bound
  raise Missing(f"Tensor.{name}")


OUT_OF_SCOPE = {
  "uop": "tinygrad internals (UOp graph)", "lazydata": "tinygrad internals", "schedule": "tinygrad internals",
  "schedule_with_vars": "tinygrad internals", "kernelize": "tinygrad internals", "shard": "multi-device",
  "shard_": "multi-device", "to_": "devices", "custom_kernel": "tinygrad internals", "callify": "tinygrad internals",
  "linear_with_vars": "tinygrad internals", "schedule_linear": "tinygrad internals", "as_param": "tinygrad internals",
  "image_dot": "IMAGE dtype", "image_conv2d": "IMAGE dtype", "from_uop": "tinygrad internals",
  "from_blob": "raw pointers", "is_param_": "tinygrad internals",
}


# ---- generic binding of tg_<name> from its prototype ---------------------------------------------------
_ALIASES = {"dim": "axis", "axis": "dim", "keepdim": "keepdims", "correction": "ddof"}


def _auto(name, self, *args, **kw):
  tgname = "tg_" + name
  ret, params = L.HDR.protos[tgname]
  others = list(args)
  # binary with a python scalar: the _scalar form (reflected forms are for operators)
  if len(params) == 2 and others and _scalar_ok(others[0]) and has(tgname + "_scalar") and not kw:
    return Tensor._scalar_op(self, others[0], tgname + "_scalar")
  cargs, outs, i, keep = [], [], 0, []
  pos = others
  # tinygrad's own signature binds the call (its defaults included); C parameters take the values by name
  # (dim/axis alike), else in tinygrad's order
  named, defaults = None, {}
  real = getattr(_REAL, name, None)
  if real is not None:
    try:
      sig = inspect.signature(real)
      ba = sig.bind(self, *args, **kw)
      ba.apply_defaults()
      named = dict(list(ba.arguments.items())[1:])
      defaults = {k: p.default for k, p in list(sig.parameters.items())[1:]}
      pos, kw = [], {}
    except (TypeError, ValueError): named = None
  def take(pname, default=None, required=True):
    nonlocal pos
    if named is not None:
      for k in (pname, _ALIASES.get(pname)):
        if k and k in named: return named.pop(k)
      if named: return named.pop(next(iter(named)))
    for k in (pname, _ALIASES.get(pname)):
      if k and k in kw: return kw.pop(k)
    if pos: return pos.pop(0)
    if required: raise Signature(f"{tgname}: the shim has no value for parameter {pname!r} (add a mapping in tgshim)")
    return default
  first_tensor = True
  while i < len(params):
    pname, ptype = params[i]
    pt = ptype.replace(" ", "")
    nxt = params[i + 1] if i + 1 < len(params) else None
    if pt in ("tg_tensor*", "consttg_tensor*"):
      if first_tensor: cargs.append(self._h); first_tensor = False
      else:
        v = take(pname, None, required=False)
        v = None if v is None else _as_tensor(v, self)
        keep.append(v)   # a temporary's handle would be freed before the call
        cargs.append(None if v is None else v._h)
    elif pt == "tg_tensor**":
      outs.append((ctypes.c_void_p * 1)())
      cargs.append(outs[-1])
    elif pt == "int" and nxt and nxt[1].replace(" ", "") == "constint*":
      v = take(nxt[0], None, required=False)
      n, arr = _axes(v)
      if n < 0: n, arr = 0, _i32([])
      cargs += [n, arr]; i += 1
    elif pt in ("int", "int64_t") and nxt and nxt[1].replace(" ", "") == "constint64_t*":
      v = take(nxt[0])
      v = (v,) if isinstance(v, int) else tuple(v)
      cargs += [len(v), _i64(v)]; i += 1
    elif pt in ("int", "int64_t"):
      v = take(pname)
      cargs.append(TG_ALL if v is None else int(v))
    elif pt == "double":
      cargs.append(float(take(pname)))
    elif pt == "bool":
      cargs.append(bool(take(pname, False, required=False)))
    elif pt == "tg_dtype":
      cargs.append(tg_dtype(take(pname)))
    else:
      raise Signature(f"{tgname}: parameter {ptype} {pname} is not handled by the generic binding")
    i += 1
  if pos or kw: raise Signature(f"{tgname}: the shim could not place arguments {pos} {kw}")
  for k, v in (named or {}).items():   # tinygrad options tg.h has no parameter for: fine at their defaults
    if k in defaults and not (v is defaults[k] or (type(v) == type(defaults[k]) and v == defaults[k])):
      raise Missing(f"{name} {k}=")
  r = fn(tgname)(*cargs)
  if ret.replace(" ", "") == "tg_tensor*": return _chk(tgname, r)
  if r != 0: raise TGError(f"{tgname}: {L.err()}")
  res = tuple(Tensor._own(o[0]) for o in outs)
  return res[0] if len(res) == 1 else res


# ---- the Tensor -----------------------------------------------------------------------------------------
_PHASE = {"phase": "forward"}


class Tensor(metaclass=_Meta):
  __slots__ = ("_h", "__weakref__")
  training = False
  no_grad = False
  default_type = dtypes.float32

  # -- construction / ownership --
  def __init__(self, data, device=None, dtype=None, requires_grad=None):
    self._h = None
    tdt = tg_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
      h = fn("tg_retain")(data._h)
      self._h = h
      if tdt is not None and tdt != data._dt: self._swap(call("tg_cast", h, tdt))
    else:
      if data is None: data = 0.0
      if isinstance(data, (bool, int, float)) or (isinstance(data, np.ndarray) and data.shape == ()) or isinstance(data, np.generic):
        v = data.item() if isinstance(data, (np.ndarray, np.generic)) else data
        if tdt is None:
          tdt = tg_dtype(np.asarray(data).dtype) if isinstance(data, (np.ndarray, np.generic)) else _py_dtype(v)
        t = _scalar_tensor(tdt, v)
      else:
        if isinstance(data, bytes): arr = np.frombuffer(data, np.uint8)
        elif isinstance(data, np.ndarray): arr = data
        else:
          arr = np.array(data)
          if tdt is None:
            if arr.dtype == np.bool_: tdt = 0
            elif np.issubdtype(arr.dtype, np.integer): tdt = 3
            else: tdt = 11
        if tdt is None: tdt = tg_dtype(arr.dtype)
        if tdt == 10:
          f32 = np.ascontiguousarray(arr, dtype=np.float32)
          arr = (f32.view(np.uint32) >> 16).astype(np.uint16)
        else:
          arr = np.ascontiguousarray(arr.astype(_NP[tdt], copy=False))
        shape = arr.shape
        t = call("tg_from_data", tdt, len(shape), _i64(shape), arr.ctypes.data_as(ctypes.c_void_p), arr.nbytes)
      self._h = fn("tg_retain")(t._h)
    # tinygrad's backward fills .grad of every float tensor in the graph (requires_grad is not needed):
    # tgc's tg_backward fills those that require one, so a float tensor made here requires one
    if requires_grad or (requires_grad is None and _is_float(self._dt)): fn("tg_set_requires_grad")(self._h, True)

  @classmethod
  def _own(cls, h):
    t = object.__new__(cls)
    t._h = h
    return t

  def _swap(self, other):
    h = fn("tg_retain")(other._h)
    fn("tg_free")(self._h)
    self._h = h

  def __del__(self):
    h = getattr(self, "_h", None)
    if h:
      try: L.LIB.tg_free(ctypes.c_void_p(h))
      except Exception: pass
      self._h = None

  # -- properties --
  @property
  def _dt(self): return fn("tg_dtype_of")(self._h)
  @property
  def shape(self):
    n = fn("tg_ndim")(self._h)
    return tuple(fn("tg_shape")(self._h, i) for i in range(n))
  @property
  def dtype(self): return _FROM_TG[self._dt]
  @property
  def ndim(self): return fn("tg_ndim")(self._h)
  @property
  def device(self): return "CPU"
  def numel(self): return fn("tg_numel")(self._h)
  def element_size(self): return fn("tg_dtype_size")(self._dt)
  def nbytes(self): return self.numel() * self.element_size()
  def size(self, dim=None): return self.shape if dim is None else self.shape[dim]
  def is_floating_point(self): return _is_float(self._dt)
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __hash__(self): return id(self)
  def __bool__(self): raise TypeError("__bool__ on Tensor is not defined")
  def __repr__(self): return f"<tgshim.Tensor {self.shape} {self.dtype}>"
  def __iter__(self): return (self[i] for i in range(self.shape[0]))

  @property
  def requires_grad(self): return bool(fn("tg_requires_grad")(self._h))
  @requires_grad.setter
  def requires_grad(self, v): fn("tg_set_requires_grad")(self._h, bool(v))
  @maps("tg_set_requires_grad")
  def requires_grad_(self, v=True): fn("tg_set_requires_grad")(self._h, bool(v)); return self

  @property
  def grad(self):
    g = fn("tg_grad")(self._h)
    return Tensor._own(fn("tg_retain")(g)) if g else None
  @grad.setter
  def grad(self, v):
    if v is None: fn("tg_zero_grad")(self._h)
    else: raise Missing("grad assignment")

  @property
  def T(self): return self.transpose()

  # -- running and reading --
  @maps("tg_realize", "tg_realize_many")
  def realize(self, *lst, **kw):
    ts = [self] + [t for t in lst if isinstance(t, Tensor)]
    arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
    status("tg_realize_many", len(ts), arr)
    return self

  @maps("tg_to_host")
  def numpy(self):
    shape, tdt = self.shape, self._dt
    out = np.empty(shape, dtype=_NP[tdt])
    if out.size:
      status("tg_to_host", self._h, out.ctypes.data_as(ctypes.c_void_p), out.nbytes)
    if tdt == 10: out = (out.astype(np.uint32) << 16).view(np.float32)
    return out

  def data(self): return memoryview(np.ascontiguousarray(self.numpy()))
  @maps("tg_to_host")
  def item(self):
    if self.numel() != 1: raise TGError("item() needs one element")
    return self.numpy().reshape(()).item()
  @maps("tg_to_host")
  def tolist(self):
    return self.numpy().tolist()

  def to(self, device=None):
    if device is None or str(device).upper().split(":")[0] in ("CPU",): return self
    raise OutOfScope(f"Tensor.to({device!r}): devices")
  def clone(self, *a, **kw): return _unmapped("clone", self)(*a, **kw)

  @maps("tg_backward")
  def backward(self, gradient=None):
    if gradient is not None: raise Missing("backward gradient=")
    _PHASE["phase"] = "backward"
    status("tg_backward", self._h)
    return self

  @maps("tg_gradient")
  def gradient(self, *targets, gradient=None, materialize_grads=False):
    if gradient is not None: raise Missing("gradient gradient=")
    _PHASE["phase"] = "backward"
    n = len(targets)
    arr = (ctypes.c_void_p * n)(*[t._h for t in targets])
    out = (ctypes.c_void_p * n)()
    status("tg_gradient", self._h, n, arr, out)
    return [Tensor._own(out[i]) for i in range(n)]

  @maps("tg_detach")
  def detach(self): return call("tg_detach", self._h)
  @maps("tg_contiguous")
  def contiguous(self, *a, **kw): return call("tg_contiguous", self._h)
  @maps("tg_assign")
  def assign(self, x):
    if not isinstance(x, Tensor): x = Tensor(x, dtype=self.dtype)   # tinygrad: a python value takes self's dtype
    if x.shape != self.shape: x = x.expand(self.shape)
    x = x.contiguous()
    status("tg_assign", self._h, x._h)
    return self

  # -- creation (static) --
  @staticmethod
  @maps("tg_empty")
  def empty(*shape, dtype=None, device=None, **kw):
    s = _shape_arg(shape); return call("tg_empty", tg_dtype(dtype) if dtype else 11, len(s), _i64(s))
  @staticmethod
  @maps("tg_zeros")
  def zeros(*shape, dtype=None, device=None, requires_grad=None, **kw):
    s = _shape_arg(shape); return Tensor._rg(call("tg_zeros", tg_dtype(dtype) if dtype else 11, len(s), _i64(s)), requires_grad)
  @staticmethod
  @maps("tg_ones")
  def ones(*shape, dtype=None, device=None, requires_grad=None, **kw):
    s = _shape_arg(shape); return Tensor._rg(call("tg_ones", tg_dtype(dtype) if dtype else 11, len(s), _i64(s)), requires_grad)
  @staticmethod
  @maps("tg_full")
  def full(shape, fill_value, dtype=None, device=None, **kw):
    s = _shape_arg((shape,))
    dt = tg_dtype(dtype) if dtype else _py_dtype(fill_value)
    return call("tg_full", dt, len(s), _i64(s), float(fill_value))
  @maps("tg_full_like")
  def full_like(self, fill_value, dtype=None, **kw):
    if dtype is not None: return Tensor.full(self.shape, fill_value, dtype=dtype)
    return call("tg_full_like", self._h, float(fill_value))
  @maps("tg_zeros_like")
  def zeros_like(self, dtype=None, **kw):
    if dtype is not None: return Tensor.zeros(self.shape, dtype=dtype)
    return call("tg_zeros_like", self._h)
  @maps("tg_ones_like")
  def ones_like(self, dtype=None, **kw):
    if dtype is not None: return Tensor.ones(self.shape, dtype=dtype)
    return call("tg_ones_like", self._h)
  @maps("tg_empty")
  def empty_like(self, dtype=None, **kw): return Tensor.empty(self.shape, dtype=dtype or self.dtype)

  @staticmethod
  def _rg(t, rg):
    if rg or (rg is None and _is_float(t._dt)): t.requires_grad_(True)
    return t

  @staticmethod
  @maps("tg_arange")
  def arange(start, stop=None, step=1, dtype=None, device=None, **kw):
    if stop is None: start, stop = 0, start
    if dtype is None:
      dt = 3 if all(isinstance(v, int) for v in (start, stop, step)) else 11
      if dt == 3:
        n = max(0, math.ceil((stop - start) / step))
        last = start + (n - 1) * step if n else start
        if not (-2**31 <= start < 2**31 and -2**31 <= last < 2**31): dt = 4
    else: dt = tg_dtype(dtype)
    if _is_int(dt):
      n = max(0, math.ceil((stop - start) / step))
      if n:
        info = np.iinfo(_NP[dt])
        if not (info.min <= start <= info.max and info.min <= start + (n - 1) * step <= info.max):
          raise OverflowError(f"arange overflows {_FROM_TG[dt]}")
    return call("tg_arange", dt, float(start), float(stop), float(step))

  @staticmethod
  @maps("tg_eye")
  def eye(n, m=None, dtype=None, device=None, **kw):
    if n < 0 or (m is not None and m < 0): raise ValueError("eye: negative size")
    return call("tg_eye", tg_dtype(dtype) if dtype else 11, n, n if m is None else m)

  @staticmethod
  @maps("tg_manual_seed")
  def manual_seed(seed=0): fn("tg_manual_seed")(seed)

  @staticmethod
  @maps("tg_rand")
  def rand(*shape, dtype=None, **kw):
    s = _shape_arg(shape); return Tensor._rg(call("tg_rand", tg_dtype(dtype) if dtype else 11, len(s), _i64(s)), None)
  @staticmethod
  @maps("tg_randn")
  def randn(*shape, dtype=None, requires_grad=None, **kw):
    s = _shape_arg(shape); return Tensor._rg(call("tg_randn", tg_dtype(dtype) if dtype else 11, len(s), _i64(s)), requires_grad)
  @staticmethod
  @maps("tg_linspace")
  def linspace(start, stop, steps, dtype=None, **kw):
    return call("tg_linspace", tg_dtype(dtype) if dtype else 11, float(start), float(stop), int(steps))
  @staticmethod
  @maps("tg_scaled_uniform")
  def scaled_uniform(*shape, dtype=None, requires_grad=None, **kw):
    s = _shape_arg(shape); return Tensor._rg(call("tg_scaled_uniform", tg_dtype(dtype) if dtype else 11, len(s), _i64(s)), requires_grad)
  @maps("tg_nonzero", "tg_nonzero_size")
  def nonzero(self, size=None, fill_value=0):
    if size is None: return call("tg_nonzero", self._h)
    return call("tg_nonzero_size", self._h, int(size), float(fill_value))
  @maps("tg_masked_select", "tg_masked_select_size")
  def masked_select(self, mask, size=None, fill_value=0):
    if size is None: return call("tg_masked_select", self._h, mask._h)
    return call("tg_masked_select_size", self._h, mask._h, int(size), float(fill_value))
  @staticmethod
  @maps("tg_randint")
  def randint(*shape, low=0, high=10, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_randint", tg_dtype(dtype) if dtype else 3, len(s), _i64(s), low, high)
  @staticmethod
  @maps("tg_uniform")
  def uniform(*shape, low=0.0, high=1.0, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_uniform", tg_dtype(dtype) if dtype else 11, len(s), _i64(s), low, high)
  @staticmethod
  @maps("tg_normal")
  def normal(*shape, mean=0.0, std=1.0, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_normal", tg_dtype(dtype) if dtype else 11, len(s), _i64(s), mean, std)
  @staticmethod
  @maps("tg_kaiming_uniform")
  def kaiming_uniform(*shape, a=0.01, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_kaiming_uniform", tg_dtype(dtype) if dtype else 11, len(s), _i64(s), a)
  @staticmethod
  @maps("tg_kaiming_normal")
  def kaiming_normal(*shape, a=0.01, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_kaiming_normal", tg_dtype(dtype) if dtype else 11, len(s), _i64(s), a)
  @staticmethod
  @maps("tg_glorot_uniform")
  def glorot_uniform(*shape, dtype=None, **kw):
    s = _shape_arg(shape); return call("tg_glorot_uniform", tg_dtype(dtype) if dtype else 11, len(s), _i64(s))

  # -- dtype --
  @maps("tg_cast")
  def cast(self, dtype):
    d = tg_dtype(dtype)
    return self if d == self._dt else call("tg_cast", self._h, d)
  @maps("tg_bitcast")
  def bitcast(self, dtype): return call("tg_bitcast", self._h, tg_dtype(dtype))
  def float(self): return self.cast(dtypes.float32)
  def half(self): return self.cast(dtypes.float16)
  def double(self): return self.cast(dtypes.float64)
  def bfloat16(self): return self.cast(dtypes.bfloat16)
  def int(self): return self.cast(dtypes.int32)
  def long(self): return self.cast(dtypes.int64)
  def short(self): return self.cast(dtypes.int16)
  def bool(self): return self.cast(dtypes.bool)

  # -- movement --
  @maps("tg_reshape")
  def reshape(self, shape, *args):
    s = (shape,) + args if not isinstance(shape, (tuple, list)) else tuple(shape)
    s = tuple(self.shape[i] if v is None else v for i, v in enumerate(s))
    return call("tg_reshape", self._h, len(s), _i64(s))
  view = reshape
  MAPS["view"] = (("tg_reshape",), "alias of reshape")

  @maps("tg_permute")
  def permute(self, order, *args):
    o = (order,) + args if not isinstance(order, (tuple, list)) else tuple(order)
    return call("tg_permute", self._h, len(o), _i32(o))

  @maps("tg_expand")
  def expand(self, shape, *args):
    s = (shape,) + args if not isinstance(shape, (tuple, list)) else tuple(shape)
    return call("tg_expand", self._h, len(s), _i64(s))

  @maps("tg_pad", "tg_pad_axes", "tg_pad_mode", "tg_pad_axes_mode")
  def pad(self, padding, mode="constant", value=0.0):
    padding = tuple(padding)
    m = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}.get(mode, 99)   # unknown: a bad enum, for tg to refuse
    if not any(isinstance(p, (tuple, list)) or p is None for p in padding):   # the flat form, last axis first
      if mode == "constant": return call("tg_pad", self._h, len(padding), _i64(padding), float(value))
      return call("tg_pad_mode", self._h, len(padding), _i64(padding), m, float(value))
    pairs = []
    for p in padding: pairs += [0, 0] if p is None else [p[0], p[1]]
    if mode == "constant": return call("tg_pad_axes", self._h, len(padding), _i64(pairs), float(value))
    return call("tg_pad_axes_mode", self._h, len(padding), _i64(pairs), m, float(value))

  @maps("tg_shrink_to")
  def shrink_to(self, shape, *args):
    s = (shape,) + args if not isinstance(shape, (tuple, list)) else tuple(shape)
    s = tuple(-1 if v is None else v for v in s)
    return call("tg_shrink_to", self._h, len(s), _i64(s))
  @maps("tg_pad_to")
  def pad_to(self, shape, *args, value=0):
    s = (shape,) + args if not isinstance(shape, (tuple, list)) else tuple(shape)
    s = tuple(-1 if v is None else v for v in s)
    return call("tg_pad_to", self._h, len(s), _i64(s), float(value))

  @maps("tg_shrink")
  def shrink(self, arg):
    b = []
    for i, a in enumerate(arg):
      b += [0, self.shape[i]] if a is None else [a[0], a[1]]
    return call("tg_shrink", self._h, len(arg), _i64(b))

  @maps("tg_flip")
  def flip(self, axis, *args):
    a = (axis,) + args if not isinstance(axis, (tuple, list)) else tuple(axis)
    return call("tg_flip", self._h, len(a), _i32(a))

  @maps("tg_transpose")
  def transpose(self, dim0=1, dim1=0): return call("tg_transpose", self._h, dim0, dim1)
  @maps("tg_flatten")
  def flatten(self, start_dim=0, end_dim=-1): return call("tg_flatten", self._h, start_dim, end_dim)
  @maps("tg_squeeze")
  def squeeze(self, dim=None):
    if isinstance(dim, (tuple, list)):
      raise Missing("squeeze dim=tuple")
    return call("tg_squeeze", self._h, TG_ALL if dim is None else dim)
  @maps("tg_unsqueeze")
  def unsqueeze(self, dim): return call("tg_unsqueeze", self._h, dim)

  @maps("tg_cat")
  def cat(self, *args, dim=0):
    ts = _flat_tensors(self, args)
    arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
    return call("tg_cat", len(ts), arr, dim)
  @maps("tg_stack")
  def stack(self, *args, dim=0):
    ts = _flat_tensors(self, args)
    arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
    return call("tg_stack", len(ts), arr, dim)

  @maps("tg_split", "tg_split_size")
  def split(self, sizes, dim=0):
    ax = dim + self.ndim if dim < 0 else dim
    if ax < 0 or ax >= self.ndim: raise TGError("split: bad dim")
    n = self.shape[ax]
    if isinstance(sizes, int):
      cap = max(1, -(-n // sizes) if sizes > 0 else 1)
      out, cnt = (ctypes.c_void_p * cap)(), ctypes.c_int(0)
      status("tg_split_size", self._h, sizes, dim, cap, ctypes.byref(cnt), out)
      return tuple(Tensor._own(out[i]) for i in range(cnt.value))
    sizes = list(sizes)
    out = (ctypes.c_void_p * len(sizes))()
    status("tg_split", self._h, len(sizes), _i64(sizes), dim, out)
    return tuple(Tensor._own(out[i]) for i in range(len(sizes)))

  @maps("tg_chunk")
  def chunk(self, chunks, dim=0):
    out, cnt = (ctypes.c_void_p * max(1, chunks))(), ctypes.c_int(0)
    status("tg_chunk", self._h, chunks, dim, ctypes.byref(cnt), out)
    return [Tensor._own(out[i]) for i in range(cnt.value)]

  @maps("tg_meshgrid")
  def meshgrid(self, *args, indexing="ij"):
    if indexing not in ("ij", "xy"): raise TGError(f"indexing={indexing!r}: ij or xy")
    ts = [self] + list(args)
    arr = (ctypes.c_void_p * len(ts))(*[t._h for t in ts])
    out = (ctypes.c_void_p * len(ts))()
    status("tg_meshgrid", len(ts), arr, indexing == "xy", out)
    return tuple(Tensor._own(out[i]) for i in range(len(ts)))

  @maps("tg_repeat")
  def repeat(self, repeats, *args):
    r = (repeats,) + args if not isinstance(repeats, (tuple, list)) else tuple(repeats)
    return call("tg_repeat", self._h, len(r), _i64(r))

  def _index(self, indices):
    """python's index forms -> a tg_index array (and the tensors it borrows), as tinygrad reads them: a list
    of ints (or a non-tuple) is one index; a list or tuple inside becomes an integer tensor (tinygrad's
    default int; bools or floats give a tensor of that dtype, which tg refuses as tinygrad does)"""
    if (isinstance(indices, list) and all(isinstance(i, (int, np.integer)) for i in indices)) or not isinstance(indices, (tuple, list)):
      indices = [indices]
    I, S = L.struct("tg_index"), L.struct("tg_slice")
    out, keep = [], []
    for i in indices:
      if i is None: out.append(I(kind=2))
      elif i is Ellipsis: out.append(I(kind=3))
      elif isinstance(i, (int, np.integer)): out.append(I(kind=0, i=int(i)))   # a python bool is an int, as tinygrad
      elif isinstance(i, slice):
        if not all(v is None or isinstance(v, (int, np.integer)) for v in (i.start, i.stop, i.step)):
          raise TGError(f"slice {i} is not supported")
        st = 1 if i.step is None else int(i.step)
        out.append(I(kind=1, slice=S(TG_END if i.start is None else int(i.start), TG_END if i.stop is None else int(i.stop), st, False)))
      elif isinstance(i, (Tensor, list, tuple, np.ndarray)):
        if not isinstance(i, Tensor):
          arr = np.array(i)
          if arr.size == 0: arr = arr.astype(np.float32)
          t = Tensor(arr, dtype=dtypes.bool if arr.dtype == np.bool_ else dtypes.int32 if np.issubdtype(arr.dtype, np.integer) else dtypes.float32)
        else: t = i
        keep.append(t)
        out.append(I(kind=4, tensor=t._h))
      else: raise TGError(f"index {i!r} of type {type(i).__name__} is not supported")
    return len(out), (I * max(1, len(out)))(*out), keep

  @maps("tg_getitem", note="ints, slices, None, Ellipsis, integer tensors and lists (tinygrad's forms)")
  def __getitem__(self, indices):
    n, arr, keep = self._index(indices)
    return call("tg_getitem", self._h, n, arr)

  @maps("tg_setitem", "tg_setitem_scalar")
  def __setitem__(self, indices, v):
    n, arr, keep = self._index(indices)
    if isinstance(v, (bool, int, float, np.generic)) and not isinstance(v, Tensor):
      status("tg_setitem_scalar", self._h, n, arr, float(v.item() if isinstance(v, np.generic) else v))
      return
    if not isinstance(v, Tensor): v = Tensor(v, dtype=self.dtype)
    status("tg_setitem", self._h, n, arr, v._h)

  # -- elementwise --
  def _scalar_op(self, v, name):
    """a tg_*_scalar call with tinygrad's weak-scalar dtype: a python float makes an int/bool tensor float32,
    a python int makes a bool tensor int32 (tg's _scalar forms take a double and cannot tell 2 from 2.0)"""
    if isinstance(v, np.generic): v = v.item()
    x = self._weak_cast(v)
    ptype = L.HDR.protos[name][1][1][1].replace("const", "").strip()
    if ptype in ("int64_t", "int"):   # the integer scalar forms (bitwise ops, shifts): exact in 64 bits
      if isinstance(v, float) and not v.is_integer(): raise TGError(f"{name}: a non-integral scalar {v}")
      return call(name, x._h, int(v))
    return call(name, x._h, float(v))

  def _weak_cast(self, v):
    """self converted to the dtype it promotes to next to tinygrad's weak python scalar v"""
    out = _promote(self._dt, _weak_dtype(v, self))
    return self if out == self._dt else self.cast(_FROM_TG[out])

  def _bin(self, x, tgname, reverse=False, scalar=True, rscalar=None, comm=False, flip=None):
    if isinstance(x, Tensor):
      a, b = (x, self) if reverse else (self, x)
      return call(tgname, a._h, b._h)
    if isinstance(x, (list, tuple, np.ndarray)): x = Tensor(x)
    if isinstance(x, Tensor): return self._bin(x, tgname, reverse, scalar, rscalar, comm, flip)
    if isinstance(x, np.generic): x = x.item()
    sname = tgname + "_scalar" if not reverse else (rscalar or "tg_r" + tgname[3:] + "_scalar")
    # the scalar goes as an exact 0-d tensor (what a C caller would write) where the scalar form cannot carry it:
    # an integer beyond 2^53 in a double; a python bool next to a bool tensor (tinygrad keeps bool, tg's integer
    # scalar forms meet a bool tensor as int32)
    tensor_path = has(sname) and (
      (isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**53 and _dbl_scalar(sname)) or
      (isinstance(x, bool) and self._dt == 0 and not _dbl_scalar(sname)))
    if not reverse:
      if scalar and has(sname) and not tensor_path: return self._scalar_op(x, sname)
      c = _const(x, self)
      return call(tgname, self._h, c._h)
    rname = sname
    if has(rname) and not tensor_path: return self._scalar_op(x, rname)
    if tensor_path:
      c = _const(x, self)   # bound: a temporary's handle would be freed before the call
      return call(tgname, c._h, self._h)
    if comm: return self._bin(x, tgname, False, scalar)
    if flip: return self._bin(x, flip, False, scalar)
    raise Missing(rname)

  @maps("tg_add", "tg_add_scalar")
  def add(self, x, reverse=False): return self._bin(x, "tg_add", reverse, comm=True)
  @maps("tg_sub", "tg_sub_scalar", "tg_rsub_scalar")
  def sub(self, x, reverse=False): return self._bin(x, "tg_sub", reverse)
  @maps("tg_mul", "tg_mul_scalar")
  def mul(self, x, reverse=False): return self._bin(x, "tg_mul", reverse, comm=True)
  @maps("tg_div", "tg_div_scalar", "tg_rdiv_scalar", "tg_div_mode", note="rounding_mode: tg_div_mode (a scalar as a 0-d tensor)")
  def div(self, x, reverse=False, rounding_mode=None):
    if rounding_mode is None: return self._bin(x, "tg_div", reverse)
    mode = {"trunc": 1, "floor": 2}.get(rounding_mode, 99)   # an unknown mode: a bad enum value, for tg to refuse
    xt = _as_tensor(x, self)
    a, b = (xt, self) if reverse else (self, xt)
    return call("tg_div_mode", a._h, b._h, mode)
  @maps("tg_floordiv", "tg_floordiv_scalar", "tg_rfloordiv_scalar")
  def _floordiv(self, x, reverse=False): return self._bin(x, "tg_floordiv", reverse)
  MAPS["__floordiv__"] = (("tg_floordiv", "tg_floordiv_scalar"), ""); MAPS["__rfloordiv__"] = (("tg_rfloordiv_scalar",), "")
  @maps("tg_idiv", "tg_idiv_scalar")
  def idiv(self, x, reverse=False): return self._bin(x, "tg_idiv", reverse, rscalar="tg_ridiv_scalar")
  @maps("tg_mod", "tg_mod_scalar", "tg_rmod_scalar")
  def mod(self, x, reverse=False): return self._bin(x, "tg_mod", reverse)
  @maps("tg_pow", "tg_pow_scalar", "tg_rpow_scalar")
  def pow(self, x, reverse=False): return self._bin(x, "tg_pow", reverse)
  @maps("tg_maximum", "tg_maximum_scalar")
  def maximum(self, x): return self._bin(x, "tg_maximum")
  @maps("tg_minimum", "tg_minimum_scalar")
  def minimum(self, x): return self._bin(x, "tg_minimum")
  @maps("tg_eq", "tg_eq_scalar")
  def eq(self, x): return self._bin(x, "tg_eq")
  @maps("tg_ne", "tg_ne_scalar")
  def ne(self, x): return self._bin(x, "tg_ne")
  @maps("tg_bitwise_and", "tg_bitwise_and_scalar")
  def bitwise_and(self, x, reverse=False): return self._bin(x, "tg_bitwise_and", reverse, comm=True)
  @maps("tg_bitwise_or", "tg_bitwise_or_scalar")
  def bitwise_or(self, x, reverse=False): return self._bin(x, "tg_bitwise_or", reverse, comm=True)
  @maps("tg_bitwise_xor", "tg_bitwise_xor_scalar")
  def bitwise_xor(self, x, reverse=False): return self._bin(x, "tg_bitwise_xor", reverse, comm=True)
  @maps("tg_lshift", "tg_lshift_scalar", "tg_rlshift_scalar")
  def lshift(self, x, reverse=False): return self._bin(x, "tg_lshift", reverse)
  @maps("tg_rshift", "tg_rshift_scalar", "tg_rrshift_scalar")
  def rshift(self, x, reverse=False): return self._bin(x, "tg_rshift", reverse)
  @maps("tg_bitwise_not")
  def bitwise_not(self): return call("tg_bitwise_not", self._h)

  def __neg__(self): return self.neg()
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __floordiv__(self, x): return self._floordiv(x)
  def __rfloordiv__(self, x): return self._floordiv(x, True)
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)
  def __and__(self, x): return self.bitwise_and(x)
  def __rand__(self, x): return self.bitwise_and(x, True)
  def __or__(self, x): return self.bitwise_or(x)
  def __ror__(self, x): return self.bitwise_or(x, True)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rxor__(self, x): return self.bitwise_xor(x, True)
  def __invert__(self): return self.bitwise_not()
  def __lshift__(self, x): return self.lshift(x)
  def __rshift__(self, x): return self.rshift(x)
  def __rlshift__(self, x): return self.lshift(x, True)
  def __rrshift__(self, x): return self.rshift(x, True)
  def __lt__(self, x): return self._bin(x, "tg_lt")
  def __gt__(self, x): return self._bin(x, "tg_gt")
  def __le__(self, x): return self._bin(x, "tg_le")
  def __ge__(self, x): return self._bin(x, "tg_ge")
  def __eq__(self, x): return self.eq(x)
  def __ne__(self, x): return self.ne(x)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return _as_tensor(x).matmul(self)
  # in-place operators, as tinygrad's: x op= y is x.assign(x op y)
  def __iadd__(self, x): return self.assign(self.add(x))
  def __isub__(self, x): return self.assign(self.sub(x))
  def __imul__(self, x): return self.assign(self.mul(x))
  def __itruediv__(self, x): return self.assign(self.div(x))
  def __ifloordiv__(self, x): return self.assign(self.__floordiv__(x))
  def __ipow__(self, x): return self.assign(self.pow(x))
  def __iand__(self, x): return self.assign(self.bitwise_and(x))
  def __ior__(self, x): return self.assign(self.bitwise_or(x))
  def __ixor__(self, x): return self.assign(self.bitwise_xor(x))
  def __ilshift__(self, x): return self.assign(self.lshift(x))
  def __irshift__(self, x): return self.assign(self.rshift(x))
  def __imatmul__(self, x): return self.assign(self.matmul(x))
  MAPS["__lt__"] = (("tg_lt",), ""); MAPS["__gt__"] = (("tg_gt",), ""); MAPS["__le__"] = (("tg_le",), "")
  MAPS["__ge__"] = (("tg_ge",), "")

  @maps("tg_where", "tg_where_scalar")
  def where(self, x, y):
    if isinstance(x, Tensor) and _scalar_ok(y) and not isinstance(y, bool):
      xx = x._weak_cast(y.item() if isinstance(y, np.generic) else y)
      return call("tg_where_scalar", self._h, xx._h, float(y))
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      x, y = _const(x), _const(y)
      if x._dt != y._dt:
        d = _FROM_TG[_promote(x._dt, y._dt)]
        x, y = x.cast(d), y.cast(d)
    elif not isinstance(x, Tensor): x = _const(x, y)
    elif not isinstance(y, Tensor): y = _const(y, x)
    return call("tg_where", self._h, x._h, y._h)

  @maps("tg_matmul")
  def matmul(self, x, reverse=False, dtype=None):
    if dtype is not None: raise Missing("matmul dtype=")
    a, b = (x, self) if reverse else (self, x)
    return call("tg_matmul", a._h, b._h)
  @maps("tg_dot")
  def dot(self, x, dtype=None):
    if dtype is not None: raise Missing("dot dtype=")
    return call("tg_dot", self._h, x._h)

  @maps("tg_masked_fill", "tg_masked_fill_tensor")
  def masked_fill(self, mask, value):
    if isinstance(value, Tensor): return call("tg_masked_fill_tensor", self._h, mask._h, value._h)
    return call("tg_masked_fill", self._h, mask._h, float(value))
  @maps("tg_lerp", "tg_lerp_scalar")
  def lerp(self, end, weight):
    if isinstance(weight, Tensor): return call("tg_lerp", self._h, end._h, weight._h)
    return call("tg_lerp_scalar", self._h, end._h, float(weight))

  @maps("tg_clamp")
  def clamp(self, min_=None, max_=None, _fn="tg_clamp"):
    if min_ is None and max_ is None: raise TGError("at least one of 'min_' or 'max_' must not be None")
    if isinstance(min_, Tensor) or isinstance(max_, Tensor): raise Missing("clamp tensor bounds")
    lo = -math.inf if min_ is None else min_
    hi = math.inf if max_ is None else max_
    x = self
    if _is_float(_promote(self._dt, _weak_dtype(lo if min_ is not None else hi, self))) and not _is_float(self._dt):
      x = self.cast(dtypes.float32)
    if not _is_float(x._dt):
      info = np.iinfo(_NP[x._dt]) if x._dt else None
      if info is not None:
        lo, hi = max(lo, info.min), min(hi, info.max)
    return call(_fn, x._h, float(lo), float(hi))
  MAPS["clip"] = (("tg_clip",), "alias of clamp")
  def clip(self, min_=None, max_=None): return self.clamp(min_, max_, _fn="tg_clip")

  @maps("tg_leaky_relu")
  def leaky_relu(self, neg_slope=0.01): return call("tg_leaky_relu", self._h, float(neg_slope))
  @maps("tg_elu")
  def elu(self, alpha=1.0): return call("tg_elu", self._h, float(alpha))
  @maps("tg_softplus")
  def softplus(self, beta=1.0):
    if beta != 1.0:
      if has("tg_softplus_beta"): return call("tg_softplus_beta", self._h, float(beta))
      raise Missing("softplus beta=")
    return call("tg_softplus", self._h)
  @maps("tg_gelu", "tg_gelu_mode")
  def gelu(self, approximate="tanh"):
    if approximate == "tanh": return call("tg_gelu", self._h)
    return call("tg_gelu_mode", self._h, {"none": 1}.get(approximate, 99))
  @maps("tg_silu")
  def swish(self): return call("tg_silu", self._h)
  MAPS["swish"] = (("tg_silu",), "alias of silu")

  # -- reductions --
  def _red(self, tgname, axis, keepdim, *extra):
    n, arr = _axes(axis)
    if n < 0: return self if not extra else call(tgname, self._h, 0, _i32([]), keepdim, *extra)
    return call(tgname, self._h, n, arr, bool(keepdim), *extra)
  @maps("tg_sum", "tg_sum_dtype")
  def sum(self, axis=None, keepdim=False, dtype=None):
    if dtype is not None: return self._red_all("tg_sum_dtype", axis, keepdim, tg_dtype(dtype))
    return self._red("tg_sum", axis, keepdim)
  @maps("tg_prod", "tg_prod_dtype")
  def prod(self, axis=None, keepdim=False, dtype=None):
    if dtype is not None: return self._red_all("tg_prod_dtype", axis, keepdim, tg_dtype(dtype))
    return self._red("tg_prod", axis, keepdim)
  def _red_all(self, tgname, axis, keepdim, *extra):
    """a reduction call for which an empty axis tuple still goes through tg (it converts)"""
    n, arr = _axes(axis)
    if n < 0:   # reduce nothing: tg's naxes 0 means every axis, so an empty tuple cannot be said to tg
      raise Missing(f"{tgname} over an empty axis tuple")
    return call(tgname, self._h, n, arr, bool(keepdim), *extra)
  @maps("tg_max")
  def max(self, axis=None, keepdim=False): return self._red("tg_max", axis, keepdim)
  @maps("tg_min")
  def min(self, axis=None, keepdim=False): return self._red("tg_min", axis, keepdim)
  @maps("tg_mean")
  def mean(self, axis=None, keepdim=False): return self._red("tg_mean", axis, keepdim)
  @maps("tg_var")
  def var(self, axis=None, keepdim=False, correction=1):
    n, arr = _axes(axis)
    if n < 0: n, arr = 0, _i32([])
    return call("tg_var", self._h, n, arr, bool(keepdim), float(correction))
  @maps("tg_std")
  def std(self, axis=None, keepdim=False, correction=1):
    n, arr = _axes(axis)
    if n < 0: n, arr = 0, _i32([])
    return call("tg_std", self._h, n, arr, bool(keepdim), float(correction))
  @maps("tg_argmax")
  def argmax(self, axis=None, keepdim=False): return call("tg_argmax", self._h, TG_ALL if axis is None else axis, bool(keepdim))
  @maps("tg_argmin")
  def argmin(self, axis=None, keepdim=False): return call("tg_argmin", self._h, TG_ALL if axis is None else axis, bool(keepdim))
  @maps("tg_softmax")
  def softmax(self, axis=-1, dtype=None):
    if dtype is not None: return call("tg_softmax_dtype", self._h, axis, tg_dtype(dtype))
    return call("tg_softmax", self._h, axis)
  @maps("tg_log_softmax")
  def log_softmax(self, axis=-1, dtype=None):
    if dtype is not None: return call("tg_log_softmax_dtype", self._h, axis, tg_dtype(dtype))
    return call("tg_log_softmax", self._h, axis)
  @maps("tg_hardsigmoid_ab")
  def hardsigmoid(self, alpha=1/6, beta=0.5): return call("tg_hardsigmoid_ab", self._h, float(alpha), float(beta))
  @maps("tg_logsumexp", "tg_logsumexp_axes")
  def logsumexp(self, axis=None, keepdim=False):
    if axis is None or isinstance(axis, (tuple, list)):
      return self._red_all("tg_logsumexp_axes", axis, keepdim)
    return call("tg_logsumexp", self._h, axis, bool(keepdim))
  @maps("tg_cumsum")
  def cumsum(self, axis=0): return call("tg_cumsum", self._h, axis)

  @staticmethod
  def _two(name, *args):
    a, b = ctypes.c_void_p(), ctypes.c_void_p()
    status(name, *args, ctypes.byref(a), ctypes.byref(b))
    return Tensor._own(a.value), Tensor._own(b.value)
  @maps("tg_cummax")
  def cummax(self, axis=0): return self._two("tg_cummax", self._h, axis)
  @maps("tg_cummin")
  def cummin(self, axis=0): return self._two("tg_cummin", self._h, axis)
  @maps("tg_sort")
  def sort(self, dim=-1, descending=False): return self._two("tg_sort", self._h, dim, bool(descending))
  @maps("tg_argsort")
  def argsort(self, dim=-1, descending=False): return call("tg_argsort", self._h, dim, bool(descending))
  @maps("tg_topk")
  def topk(self, k, dim=-1, largest=True, sorted_=True):
    return self._two("tg_topk", self._h, k, dim, bool(largest), bool(sorted_))
  @maps("tg_var_mean")
  def var_mean(self, axis=None, keepdim=False, correction=1):
    n, arr = _axes(axis)
    if n < 0: raise Missing("var_mean over an empty axis tuple")
    return self._two("tg_var_mean", self._h, n, arr, bool(keepdim), float(correction))
  @maps("tg_std_mean")
  def std_mean(self, axis=None, keepdim=False, correction=1):
    n, arr = _axes(axis)
    if n < 0: raise Missing("std_mean over an empty axis tuple")
    return self._two("tg_std_mean", self._h, n, arr, bool(keepdim), float(correction))

  # -- nn --
  @staticmethod
  def _ints(v, name):
    S = L.struct("tg_ints")
    if v is None: return S()
    if isinstance(v, int): v = (v,)
    v = tuple(v)
    if len(v) > 6: raise Missing(f"{name} with {len(v)} values")
    if any(isinstance(x, (tuple, list)) for x in v): raise Missing(f"{name} nested pairs")
    return S(len(v), (ctypes.c_int64 * 6)(*v))

  @maps("tg_conv2d")
  def conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, dtype=None):
    if dtype is not None: raise Missing("conv2d dtype=")
    if isinstance(padding, str): raise Missing(f"conv2d padding={padding!r}")
    O = L.struct("tg_conv_opts")
    o = O(groups, self._ints(stride, "stride"), self._ints(dilation, "dilation"), self._ints(padding, "padding"),
          self._ints(None, ""))
    return call("tg_conv2d", self._h, weight._h, bias._h if bias is not None else None, o)

  @maps("tg_conv_transpose2d")
  def conv_transpose2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0):
    O = L.struct("tg_conv_opts")
    o = O(groups, self._ints(stride, "stride"), self._ints(dilation, "dilation"), self._ints(padding, "padding"),
          self._ints(output_padding, "output_padding"))
    return call("tg_conv_transpose2d", self._h, weight._h, bias._h if bias is not None else None, o)

  def _pool(self, kernel_size, stride, dilation, padding, ceil_mode, count_include_pad=True):
    P = L.struct("tg_pool_opts")
    k = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size, kernel_size)
    return P(len(k), self._ints(k, "kernel"), self._ints(stride, "stride"), self._ints(dilation, "dilation"),
             self._ints(padding, "padding"), bool(ceil_mode), bool(count_include_pad))

  @maps("tg_max_pool2d", "tg_max_pool2d_with_indices")
  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, return_indices=False):
    o = self._pool(kernel_size, stride, dilation, padding, ceil_mode)
    if return_indices: return self._two("tg_max_pool2d_with_indices", self._h, o)
    return call("tg_max_pool2d", self._h, o)
  @maps("tg_max_unpool2d")
  def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None):
    o = self._pool(kernel_size, stride, dilation, padding, False)
    osz = () if output_size is None else tuple(output_size)
    return call("tg_max_unpool2d", self._h, indices._h, o, len(osz), _i64(osz))
  @maps("tg_avg_pool2d")
  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True):
    return call("tg_avg_pool2d", self._h, self._pool(kernel_size, stride, dilation, padding, ceil_mode, count_include_pad))

  @maps("tg_layernorm")
  def layernorm(self, axis=-1, eps=1e-5):
    n, arr = _axes(axis)
    return call("tg_layernorm", self._h, max(n, 0), arr, float(eps))
  @maps("tg_rmsnorm")
  def rmsnorm(self, axis=-1, eps=1e-6):
    n, arr = _axes(axis)
    return call("tg_rmsnorm", self._h, max(n, 0), arr, float(eps))
  @maps("tg_batchnorm")
  def batchnorm(self, weight, bias, mean, invstd, axis=1):
    if axis != 1 and axis != (1,): raise Missing("batchnorm axis!=1")
    h = lambda t: t._h if t is not None else None
    return call("tg_batchnorm", self._h, h(weight), h(bias), h(mean), h(invstd))
  @maps("tg_dropout")
  def dropout(self, p=0.5): return call("tg_dropout", self._h, float(p))
  @maps("tg_one_hot")
  def one_hot(self, num_classes=-1):
    return call("tg_one_hot", self._h, num_classes)
  @maps("tg_gather")
  def gather(self, dim, index): return call("tg_gather", self._h, dim, index._h)
  @maps("tg_diag")
  def diag(self): return call("tg_diag", self._h, 0)   # tinygrad's diag has no offset
  @maps("tg_triu")
  def triu(self, diagonal=0): return call("tg_triu", self._h, diagonal)
  @maps("tg_tril")
  def tril(self, diagonal=0): return call("tg_tril", self._h, diagonal)
  @maps("tg_linear")
  def linear(self, weight, bias=None, dtype=None):
    return call("tg_linear", self._h, weight._h, bias._h if bias is not None else None)
  def sequential(self, ll):
    x = self
    for f in ll: x = f(x)
    return x
  MAPS["sequential"] = ((), "python: applies a list of callables")

  @maps("tg_scaled_dot_product_attention")
  def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
    return call("tg_scaled_dot_product_attention", self._h, key._h, value._h,
                attn_mask._h if attn_mask is not None else None, float(dropout_p), bool(is_causal), bool(enable_gqa))

  def _loss_opts(self, reduction="mean", label_smoothing=0.0, ignore_index=None, weight=None, pos_weight=None):
    O = L.struct("tg_loss_opts")
    red = {"mean": 0, "sum": 1, "none": 2}.get(reduction, 99)   # an unknown name: a bad enum value, for tg to refuse
    o = O(red, float(label_smoothing), ignore_index is not None, -1 if ignore_index is None else int(ignore_index))
    if weight is not None: o.weight = weight._h
    if pos_weight is not None: o.pos_weight = pos_weight._h
    return o
  def _sparse_loss_opts(self, reduction, label_smoothing, ignore_index):
    # tinygrad's sparse_categorical_crossentropy ignores nothing with its default ignore_index -1
    return self._loss_opts(reduction, label_smoothing, None if ignore_index == -1 else ignore_index)
  @maps("tg_sparse_categorical_crossentropy")
  def sparse_categorical_crossentropy(self, Y, ignore_index=-1, label_smoothing=0.0, reduction="mean"):
    return call("tg_sparse_categorical_crossentropy", self._h, Y._h, self._sparse_loss_opts(reduction, label_smoothing, ignore_index))
  @maps("tg_cross_entropy")
  def cross_entropy(self, Y, reduction="mean", label_smoothing=0.0):
    return call("tg_cross_entropy", self._h, Y._h, self._loss_opts(reduction, label_smoothing))
  @maps("tg_nll_loss")
  def nll_loss(self, Y, weight=None, ignore_index=None, reduction="mean"):
    return call("tg_nll_loss", self._h, Y._h, self._loss_opts(reduction, 0.0, ignore_index, weight=weight))
  @maps("tg_binary_crossentropy")
  def binary_crossentropy(self, Y, reduction="mean"):
    return call("tg_binary_crossentropy", self._h, Y._h, self._loss_opts(reduction))
  @maps("tg_binary_crossentropy_logits")
  def binary_crossentropy_logits(self, Y, reduction="mean", pos_weight=None):
    return call("tg_binary_crossentropy_logits", self._h, Y._h, self._loss_opts(reduction, pos_weight=pos_weight))
  @maps("tg_interpolate")
  def interpolate(self, size, mode="linear", align_corners=False):
    m = {"nearest": 0, "linear": 1, "nearest-exact": 2}.get(mode, 99)   # unknown: a bad enum, for tg to refuse
    size = tuple(size)
    return call("tg_interpolate", self._h, len(size), _i64(size), m, bool(align_corners))

  @staticmethod
  @maps("tg_einsum")
  def einsum(formula, *operands, dtype=None):
    if dtype is not None: raise Missing("einsum dtype=")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    arr = (ctypes.c_void_p * max(1, len(operands)))(*[t._h for t in operands])
    return call("tg_einsum", formula.encode(), len(operands), arr)

  @maps("tg_scatter", "tg_scatter_scalar")
  def scatter(self, dim, index, src, reduce=None):
    red = {None: -1, "add": 0, "multiply": 1}.get(reduce, 99)   # unknown: a bad value, for tg to refuse
    if isinstance(src, Tensor):
      if reduce is not None: raise TGError("a tensor src with reduce: tinygrad refuses it (scatter_reduce)")
      return call("tg_scatter", self._h, dim, index._h, src._h)
    return call("tg_scatter_scalar", self._h, dim, index._h, float(src), red)
  @maps("tg_scatter_reduce")
  def scatter_reduce(self, dim, index, src, reduce, include_self=True):
    op = {"sum": 0, "prod": 1, "mean": 2, "amax": 3, "amin": 4}.get(reduce, 99)
    return call("tg_scatter_reduce", self._h, dim, index._h, src._h, op, bool(include_self))


# simple unary methods: tinygrad name -> tg function (same name unless noted)
_UNARY = ["neg", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "reciprocal", "abs", "sign", "square",
          "trunc", "floor", "ceil", "relu", "sigmoid", "tanh", "silu", "relu6", "hardswish", "mish",
          "logical_not"]


def _mk_unary(tgname):
  def f(self): return call(tgname, self._h)
  return f


for _n in _UNARY:
  setattr(Tensor, _n, _mk_unary("tg_" + _n))
  MAPS[_n] = (("tg_" + _n,), "")


def _instance_getattr(self, name):
  if name.startswith("__") or name in ("_h",): raise AttributeError(name)
  return _unmapped(name, self)


Tensor.__getattr__ = _instance_getattr
