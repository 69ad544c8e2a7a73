"""Minimal GGUF v3 reader and writer (pure Python + NumPy).

Written for kvserve from the GGUF format description (header, typed metadata,
tensor infos, aligned data section). Supports every metadata value type
(including nested arrays) and F32 / F16 tensors.

Dimension convention: GGUF stores ne[0] first, where ne[0] is the contiguous
(row) length. A NumPy array of shape (a, b, c) is therefore written with dims
[c, b, a], and the reader returns arrays in NumPy (row-major) shape, i.e. the
GGUF dims reversed. A PyTorch Linear weight [out, in] is written as dims
[in, out] and read back as shape (out, in).

Usage:
    w = GGUFWriter()
    w.add_uint32("llama.block_count", 2)
    w.add_string("general.name", "x")
    w.add_array("tokenizer.ggml.tokens", ["a", "b"], GGUFType.STRING)
    w.add_tensor("token_embd.weight", np.zeros((vocab, dim), np.float32))
    w.write("model.gguf")

    r = GGUFReader("model.gguf")
    r.metadata["llama.block_count"]     # -> 2
    r.tensors["token_embd.weight"]      # -> np.ndarray (vocab, dim)
"""

import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32


class GGUFType:
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# ggml tensor types handled here.
GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
_GGML_NP = {GGML_TYPE_F32: np.dtype("<f4"), GGML_TYPE_F16: np.dtype("<f2")}

# struct format for fixed-size scalar metadata types.
_SCALAR_FMT = {
    GGUFType.UINT8: "<B",
    GGUFType.INT8: "<b",
    GGUFType.UINT16: "<H",
    GGUFType.INT16: "<h",
    GGUFType.UINT32: "<I",
    GGUFType.INT32: "<i",
    GGUFType.FLOAT32: "<f",
    GGUFType.BOOL: "<?",
    GGUFType.UINT64: "<Q",
    GGUFType.INT64: "<q",
    GGUFType.FLOAT64: "<d",
}


def _align(n, a):
    return (n + a - 1) // a * a


class GGUFError(ValueError):
    pass


# ----------------------------------------------------------------------------
# Writer


class GGUFWriter:
    """Collects metadata and tensors in insertion order, then writes one file."""

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self.kv = []  # (key, vtype, value, elem_type or None)
        self.tensors = []  # (name, np.ndarray, ggml_type)
        if alignment != DEFAULT_ALIGNMENT:
            self.add_uint32("general.alignment", alignment)

    # -- metadata ------------------------------------------------------------
    def add(self, key, value, vtype, elem_type=None):
        if any(k == key for k, _, _, _ in self.kv):
            raise GGUFError(f"duplicate metadata key {key!r}")
        if vtype == GGUFType.ARRAY and elem_type is None:
            raise GGUFError("array metadata needs elem_type")
        self.kv.append((key, vtype, value, elem_type))

    def add_uint8(self, k, v): self.add(k, v, GGUFType.UINT8)
    def add_int8(self, k, v): self.add(k, v, GGUFType.INT8)
    def add_uint16(self, k, v): self.add(k, v, GGUFType.UINT16)
    def add_int16(self, k, v): self.add(k, v, GGUFType.INT16)
    def add_uint32(self, k, v): self.add(k, v, GGUFType.UINT32)
    def add_int32(self, k, v): self.add(k, v, GGUFType.INT32)
    def add_uint64(self, k, v): self.add(k, v, GGUFType.UINT64)
    def add_int64(self, k, v): self.add(k, v, GGUFType.INT64)
    def add_float32(self, k, v): self.add(k, v, GGUFType.FLOAT32)
    def add_float64(self, k, v): self.add(k, v, GGUFType.FLOAT64)
    def add_bool(self, k, v): self.add(k, bool(v), GGUFType.BOOL)
    def add_string(self, k, v): self.add(k, v, GGUFType.STRING)

    def add_array(self, key, values, elem_type):
        """elem_type may be GGUFType.ARRAY for nested arrays: then each value
        is a (sub_elem_type, list) pair."""
        self.add(key, list(values), GGUFType.ARRAY, elem_type)

    # -- tensors -------------------------------------------------------------
    def add_tensor(self, name, array, ggml_type=GGML_TYPE_F32):
        if ggml_type not in _GGML_NP:
            raise GGUFError(f"unsupported ggml type {ggml_type}")
        if any(n == name for n, _, _ in self.tensors):
            raise GGUFError(f"duplicate tensor {name!r}")
        arr = np.ascontiguousarray(np.asarray(array), dtype=_GGML_NP[ggml_type])
        if arr.ndim < 1 or arr.ndim > 4:
            raise GGUFError(f"tensor {name!r}: {arr.ndim} dims unsupported")
        self.tensors.append((name, arr, ggml_type))

    # -- serialization -------------------------------------------------------
    @staticmethod
    def _string(s):
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        return struct.pack("<Q", len(b)) + b

    def _value(self, vtype, value, elem_type=None):
        if vtype in _SCALAR_FMT:
            return struct.pack(_SCALAR_FMT[vtype], value)
        if vtype == GGUFType.STRING:
            return self._string(value)
        if vtype == GGUFType.ARRAY:
            out = [struct.pack("<IQ", elem_type, len(value))]
            if elem_type in _SCALAR_FMT:
                # Fast path for long numeric arrays.
                fmt = _SCALAR_FMT[elem_type]
                out.append(struct.pack("<" + fmt[1] * len(value), *value))
            elif elem_type == GGUFType.STRING:
                out.extend(self._string(v) for v in value)
            elif elem_type == GGUFType.ARRAY:
                out.extend(self._value(GGUFType.ARRAY, sub, sub_t) for sub_t, sub in value)
            else:
                raise GGUFError(f"bad array element type {elem_type}")
            return b"".join(out)
        raise GGUFError(f"bad metadata type {vtype}")

    def to_bytes(self):
        parts = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, vtype, value, elem_type in self.kv:
            parts.append(self._string(key))
            parts.append(struct.pack("<I", vtype))
            parts.append(self._value(vtype, value, elem_type))
        offset = 0
        offsets = []
        for name, arr, gtype in self.tensors:
            offsets.append(offset)
            dims = list(reversed(arr.shape))  # ne[0] = contiguous length
            parts.append(self._string(name))
            parts.append(struct.pack("<I", len(dims)))
            parts.append(struct.pack("<" + "Q" * len(dims), *dims))
            parts.append(struct.pack("<IQ", gtype, offset))
            offset = _align(offset + arr.nbytes, self.alignment)
        header = b"".join(parts)
        data_start = _align(len(header), self.alignment)
        out = bytearray(header)
        out += b"\0" * (data_start - len(header))
        for (name, arr, _), off in zip(self.tensors, offsets):
            assert len(out) == data_start + off
            out += arr.tobytes()
            out += b"\0" * (_align(len(out), self.alignment) - len(out))
        return bytes(out)

    def write(self, path):
        data = self.to_bytes()
        with open(path, "wb") as f:
            f.write(data)
        return len(data)


# ----------------------------------------------------------------------------
# Reader


class GGUFTensorInfo:
    def __init__(self, name, dims, ggml_type, offset):
        self.name = name
        self.dims = dims  # GGUF order, ne[0] first
        self.ggml_type = ggml_type
        self.offset = offset  # relative to the data section

    @property
    def shape(self):  # NumPy order
        return tuple(reversed(self.dims))


class GGUFReader:
    """Parses a whole GGUF file. metadata: key -> Python value (arrays become
    lists); metadata_types: key -> (vtype, elem_type); tensors: name -> NumPy
    array view (read-only, NumPy shape = GGUF dims reversed)."""

    def __init__(self, path_or_bytes):
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self.buf = memoryview(bytes(path_or_bytes))
        else:
            with open(path_or_bytes, "rb") as f:
                self.buf = memoryview(f.read())
        self.pos = 0
        self.metadata = {}
        self.metadata_types = {}
        self.tensor_infos = []
        self.tensors = {}
        self._parse()

    def _take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"truncated file at offset {self.pos} (need {n} bytes)")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def _unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self._take(size))

    def _string(self):
        (n,) = self._unpack("<Q")
        return bytes(self._take(n)).decode("utf-8")

    def _value(self, vtype):
        if vtype in _SCALAR_FMT:
            return self._unpack(_SCALAR_FMT[vtype])[0], None
        if vtype == GGUFType.STRING:
            return self._string(), None
        if vtype == GGUFType.ARRAY:
            elem_type, count = self._unpack("<IQ")
            if elem_type in _SCALAR_FMT:
                fmt = _SCALAR_FMT[elem_type]
                size = struct.calcsize(fmt)
                raw = self._take(size * count)
                return list(struct.unpack("<" + fmt[1] * count, raw)), elem_type
            if elem_type == GGUFType.STRING:
                return [self._string() for _ in range(count)], elem_type
            if elem_type == GGUFType.ARRAY:
                return [self._value(GGUFType.ARRAY)[0] for _ in range(count)], elem_type
            raise GGUFError(f"bad array element type {elem_type}")
        raise GGUFError(f"bad metadata value type {vtype}")

    def _parse(self):
        if bytes(self._take(4)) != GGUF_MAGIC:
            raise GGUFError("not a GGUF file (bad magic)")
        (version,) = self._unpack("<I")
        if version != GGUF_VERSION:
            raise GGUFError(f"unsupported GGUF version {version}")
        self.version = version
        n_tensors, n_kv = self._unpack("<QQ")
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            value, elem_type = self._value(vtype)
            if key in self.metadata:
                raise GGUFError(f"duplicate metadata key {key!r}")
            self.metadata[key] = value
            self.metadata_types[key] = (vtype, elem_type)
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"tensor {name!r}: bad n_dims {n_dims}")
            dims = list(self._unpack("<" + "Q" * n_dims))
            gtype, offset = self._unpack("<IQ")
            self.tensor_infos.append(GGUFTensorInfo(name, dims, gtype, offset))
        self.data_offset = _align(self.pos, self.alignment)
        for ti in self.tensor_infos:
            if ti.ggml_type not in _GGML_NP:
                raise GGUFError(f"tensor {ti.name!r}: ggml type {ti.ggml_type} unsupported here")
            if ti.offset % self.alignment:
                raise GGUFError(f"tensor {ti.name!r}: misaligned offset {ti.offset}")
            dt = _GGML_NP[ti.ggml_type]
            count = int(np.prod(ti.dims))
            start = self.data_offset + ti.offset
            end = start + count * dt.itemsize
            if end > len(self.buf):
                raise GGUFError(f"tensor {ti.name!r}: data past end of file")
            arr = np.frombuffer(self.buf[start:end], dtype=dt).reshape(ti.shape)
            self.tensors[ti.name] = arr


def _main(argv):
    """`python3 tools/gguf.py FILE` dumps metadata (long arrays abbreviated) and tensor infos."""
    if len(argv) != 2:
        print("usage: gguf.py FILE.gguf", file=sys.stderr)
        return 2
    r = GGUFReader(argv[1])
    print(f"GGUF v{r.version}, {len(r.metadata)} metadata keys, {len(r.tensor_infos)} tensors")
    for k, v in r.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            v = f"[{', '.join(repr(x) for x in v[:6])}, ... ({len(v)} items)]"
        elif isinstance(v, str) and len(v) > 120:
            v = repr(v[:117] + "...")
        print(f"  {k} = {v}")
    total = 0
    for ti in r.tensor_infos:
        n = int(np.prod(ti.dims))
        total += n
        print(f"  {ti.name:28s} type={ti.ggml_type} dims={ti.dims}")
    print(f"  total parameters: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
