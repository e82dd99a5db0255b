"""GGUF v3 writer and reader for the tiny model's scripts: f32/f16 tensors, every key-value type.

Written from the GGUF specification (ggml's docs/gguf.md): header, key-value pairs, tensor
infos, data aligned to general.alignment (32 by default). Needs the Python standard library
and numpy only, so tools that just read or write a file do not need torch.
"""

import struct

import numpy as np


GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, \
    T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR_FMT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
               T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
               T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}
GGML_F32, GGML_F16 = 0, 1


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_value(vtype, value):
    if vtype == T_STRING:
        return _gguf_str(value)
    if vtype == T_ARRAY:
        etype, items = value
        out = [struct.pack("<IQ", etype, len(items))]
        if etype == T_STRING:
            out += [_gguf_str(x) for x in items]
        else:
            out.append(np.asarray(items, dtype=np.dtype(_SCALAR_FMT[etype])).tobytes())
        return b"".join(out)
    return struct.pack(_SCALAR_FMT[vtype], value)


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: list of (key, type, value); arrays as (T_ARRAY, (elem_type, list)).
    tensors: list of (name, numpy array in PyTorch (row-major) shape, ggml type).
    The ggml dims written are the reversed numpy shape (ne[0] = last axis)."""
    header = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs))]
    for key, vtype, value in kvs:
        header += [_gguf_str(key), struct.pack("<I", vtype), _gguf_value(vtype, value)]
    blobs, offset = [], 0
    for name, arr, gtype in tensors:
        arr = np.ascontiguousarray(arr, dtype=np.float32 if gtype == GGML_F32 else np.float16)
        ne = list(reversed(arr.shape))
        header += [_gguf_str(name), struct.pack("<I", len(ne))]
        header += [struct.pack("<Q", d) for d in ne]
        header += [struct.pack("<IQ", gtype, offset)]
        data = arr.tobytes()
        pad = (-len(data)) % alignment
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = b"".join(header)
    head += b"\0" * ((-len(head)) % alignment)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    return len(head) + offset


def read_gguf(path):
    """Parse a GGUF v3 file. Returns (kv dict, tensors dict name -> numpy array
    in row-major shape reversed(ne), info dict name -> (ne, type, offset))."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(vtype):
        if vtype == T_STRING:
            return string()
        if vtype == T_ARRAY:
            etype, n = take("<I"), take("<Q")
            return [value(etype) for _ in range(n)]
        return take(_SCALAR_FMT[vtype])

    if buf[:4] != GGUF_MAGIC:
        raise ValueError("not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    if version != 3:
        raise ValueError("unsupported GGUF version %d" % version)
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("<I"))
    infos = {}
    order = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        gtype, off = take("<I"), take("<Q")
        infos[name] = (ne, gtype, off)
        order.append(name)
    align = kv.get("general.alignment", 32)
    data_start = pos + ((-pos) % align)
    tensors = {}
    for name in order:
        ne, gtype, off = infos[name]
        if off % align:
            raise ValueError("tensor %s misaligned" % name)
        dt = {GGML_F32: np.float32, GGML_F16: np.float16}[gtype]
        cnt = int(np.prod(ne))
        start = data_start + off
        arr = np.frombuffer(buf, dtype=dt, count=cnt, offset=start)
        tensors[name] = arr.reshape(list(reversed(ne))).astype(np.float32)
    return kv, tensors, infos


def read_gguf_kvs(path):
    """The key-value pairs of a GGUF v3 file, typed as write_gguf takes them: a list of
    (key, type, value), arrays as (T_ARRAY, (elem_type, list)), in file order. Copying a
    vocabulary's keys this way keeps their types, so the copy is byte-exact."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:4] != GGUF_MAGIC or struct.unpack_from("<I", buf, 4)[0] != 3:
        raise ValueError("not a GGUF v3 file")
    pos = 24
    out = []

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def value(vtype):
        nonlocal pos
        if vtype == T_STRING:
            n = take("<Q")
            s = buf[pos:pos + n].decode("utf-8")
            pos += n
            return s
        if vtype == T_ARRAY:
            etype, n = take("<I"), take("<Q")
            return (etype, [value(etype) for _ in range(n)])
        return take(_SCALAR_FMT[vtype])

    for _ in range(struct.unpack_from("<Q", buf, 16)[0]):
        key = value(T_STRING)
        vtype = take("<I")
        out.append((key, vtype, value(vtype)))
    return out
