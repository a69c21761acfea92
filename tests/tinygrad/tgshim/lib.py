"""libtg.so through ctypes, with every prototype read from include/tg.h.

The header is the source of truth: each `tg_*` declaration is parsed into ctypes argtypes/restype, and
the simple option structs (tg_ints, tg_conv_opts, ...) into ctypes Structures. So a function another
branch adds is callable as soon as the library and header have it, and a call whose argument count does
not match the header raises Signature (never a crash from a guessed prototype).

fn("tg_copysign") returns the bound function, or raises Missing("tg_copysign") when the loaded library
or the header lacks it.
"""
import ctypes, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
LIB_PATH = os.environ.get("TG_LIB", os.path.join(ROOT, "build", "libtg.so"))
HDR_PATH = os.environ.get("TG_H", os.path.join(ROOT, "include", "tg.h"))


class Missing(Exception):
  """A tinygrad method, keyword or form with no tg.h counterpart; str() is the key counted by the runner."""
  def __init__(self, what, detail=""):
    super().__init__(what)
    self.what, self.detail = what, detail


class OutOfScope(Exception):
  """Something outside tg.h's scope (devices, tinygrad internals)."""


class Signature(Exception):
  """The shim calls a tg_* function with arguments that do not fit the header's prototype."""


class TGError(NotImplementedError, ValueError, IndexError, TypeError, AssertionError):
  """A tg_* call returned an error (NULL or a negative tg_status). tgc has only error codes, so this stands
  for every Python exception type tinygrad could raise where the test expects a refusal (NotImplementedError
  is a RuntimeError)."""


# ---- header parsing -----------------------------------------------------------------------------------
_SIMPLE = {
  "int": ctypes.c_int, "unsigned": ctypes.c_uint, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
  "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "double": ctypes.c_double, "float": ctypes.c_float,
  "bool": ctypes.c_bool, "size_t": ctypes.c_size_t, "char": ctypes.c_char, "uint8_t": ctypes.c_uint8,
}


def _strip_comments(src):
  src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
  return re.sub(r"//[^\n]*", " ", src)


class Header:
  def __init__(self, path):
    raw = open(path).read()
    self.doc = {}      # tg_name -> the comment text near its declaration (for reports)
    self.macros = {}
    for m in re.finditer(r"^#define\s+(\w+)\s+(\(?-?[0-9xXa-fA-F]+\)?)\s*$", raw, flags=re.M):
      try: self.macros[m.group(1)] = int(m.group(2).strip("()"), 0)
      except ValueError: pass
    src = _strip_comments(raw)
    src = re.sub(r"^\s*#.*$", " ", src, flags=re.M)
    self.enums = set(re.findall(r"typedef\s+enum\s+\w*\s*\{[^}]*\}\s*(\w+)\s*;", src, flags=re.S))
    self.opaque = set(re.findall(r"typedef\s+struct\s+\w+\s+(\w+)\s*;", src))
    self.structs = {}
    for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{([^}]*)\}\s*(\w+)\s*;", src, flags=re.S):
      self._struct(m.group(2), m.group(1))
    self.protos = {}
    flat = re.sub(r"\s+", " ", src)
    for m in re.finditer(r"([A-Za-z_][\w \*]*?)\b(tg_\w+)\s*\(([^()]*)\)\s*;", flat):
      ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
      if ret.startswith("typedef"): continue
      self.protos[name] = (ret, self._params(params))

  def ctype(self, t):
    """a C type spelling -> ctypes type, or None if unsupported"""
    t = re.sub(r"\bconst\b", " ", t)
    t = re.sub(r"\s+", " ", t).strip()
    t = t.replace(" *", "*").replace("* ", "*")
    stars = t.count("*")
    base = t.replace("*", "").strip()
    if base == "void" and stars == 0: return None
    if base == "void": return ctypes.c_void_p if stars == 1 else ctypes.POINTER(ctypes.c_void_p)
    if base == "char" and stars == 1: return ctypes.c_char_p
    if base in self.opaque or base == "tg_tensor":
      if stars == 1: return ctypes.c_void_p
      if stars == 2: return ctypes.POINTER(ctypes.c_void_p)
      return None
    if base in _SIMPLE: c = _SIMPLE[base]
    elif base in self.enums: c = ctypes.c_int
    elif base in self.structs: c = self.structs[base]
    elif base.endswith("_fn"): return ctypes.c_void_p
    else: return None
    for _ in range(stars): c = ctypes.POINTER(c)
    return c

  def _struct(self, name, body):
    fields = []
    for decl in body.split(";"):
      decl = decl.strip()
      if not decl: continue
      m = re.match(r"(.*?\b[\w]+)\s*(\**\s*\w+.*)$", decl)
      # split "type a, *b, c[4]"
      parts = decl.split(",")
      first = parts[0].strip()
      mm = re.match(r"(.+?)([\*\s]+)(\w+)\s*(\[[^\]]*\])?$", first)
      if not mm: self.structs[name] = None; return
      base = mm.group(1).strip()
      names = [(mm.group(2).count("*"), mm.group(3), mm.group(4))]
      for p in parts[1:]:
        pm = re.match(r"\s*(\**)\s*(\w+)\s*(\[[^\]]*\])?\s*$", p)
        if not pm: self.structs[name] = None; return
        names.append((len(pm.group(1)), pm.group(2), pm.group(3)))
      for stars, fname, arr in names:
        c = self.ctype(base + "*" * stars)
        if c is None: self.structs[name] = None; return
        if arr:
          expr = arr[1:-1]
          for k, v in self.macros.items(): expr = re.sub(r"\b%s\b" % k, str(v), expr)
          try: c = c * int(eval(expr, {"__builtins__": {}}))
          except Exception: self.structs[name] = None; return
        fields.append((fname, c))
    self.structs[name] = type(name, (ctypes.Structure,), {"_fields_": fields})

  def _params(self, params):
    if params in ("", "void"): return []
    out = []
    for p in params.split(","):
      p = p.strip()
      m = re.match(r"(.*?)(\w+)$", p)
      if m and m.group(1).strip() and m.group(1).strip() not in ("const",):
        out.append((m.group(2), m.group(1).strip()))
      else:
        out.append(("", p))
    return out


HDR = Header(HDR_PATH)
try:
  LIB = ctypes.CDLL(LIB_PATH)
except OSError as e:
  raise SystemExit(f"tgshim: cannot load {LIB_PATH} (build it with make, or set TG_LIB): {e}")

_bound = {}


class Fn:
  def __init__(self, name, cfn, argtypes, ret, pnames):
    self.name, self.cfn, self.argtypes, self.ret, self.pnames = name, cfn, argtypes, ret, pnames

  def __call__(self, *args):
    if len(args) != len(self.argtypes):
      raise Signature(f"{self.name}: header has {len(self.argtypes)} parameters ({', '.join(self.pnames)}), "
                      f"shim passed {len(args)}")
    try:
      return self.cfn(*args)
    except ctypes.ArgumentError as e:
      raise Signature(f"{self.name}: {e}")


def has(name):
  return name in HDR.protos and hasattr(LIB, name)


def fn(name):
  f = _bound.get(name)
  if f is not None: return f
  if name not in HDR.protos or not hasattr(LIB, name):
    raise Missing(name)
  ret, params = HDR.protos[name]
  argtypes = []
  for pname, ptype in params:
    c = HDR.ctype(ptype)
    if c is None: raise Signature(f"{name}: parameter type {ptype!r} is not supported by the shim")
    argtypes.append(c)
  cfn = getattr(LIB, name)
  cfn.argtypes = argtypes
  cfn.restype = None if ret.strip() == "void" else HDR.ctype(ret)
  f = Fn(name, cfn, argtypes, ret, [f"{t} {n}" for n, t in params])
  _bound[name] = f
  return f


def err():
  return fn("tg_error")().decode(errors="replace")


def struct(name):
  s = HDR.structs.get(name)
  if s is None: raise Missing(name)
  return s
