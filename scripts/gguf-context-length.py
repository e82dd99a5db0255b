#!/usr/bin/python3
"""Copy a GGUF file with its {arch}.context_length set to N (the bytes of the value patched in
place, everything else identical), as the issue-49 depth runs did to run past a file's length:

    scripts/gguf-context-length.py IN.gguf OUT.gguf 32768

kvgraph refuses n_ctx above a file's context length (kvgraph.h); llama.cpp warns and goes on."""
import shutil
import struct
import sys

SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
STRING, ARRAY = 8, 9


def skip_value(f, vtype):
    if vtype in SCALAR:
        f.seek(struct.calcsize('<' + SCALAR[vtype]), 1)
    elif vtype == STRING:
        (n,) = struct.unpack('<Q', f.read(8))
        f.seek(n, 1)
    elif vtype == ARRAY:
        etype, n = struct.unpack('<IQ', f.read(12))
        for _ in range(n):
            skip_value(f, etype)
    else:
        raise SystemExit(f'unknown GGUF value type {vtype}')


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    src, dst, n_ctx = sys.argv[1], sys.argv[2], int(sys.argv[3])
    shutil.copyfile(src, dst)
    with open(dst, 'r+b') as f:
        magic, version, _, n_kv = struct.unpack('<4sIQQ', f.read(24))
        if magic != b'GGUF' or version < 2:
            raise SystemExit(f'{src}: not a GGUF v2/v3 file')
        for _ in range(n_kv):
            (klen,) = struct.unpack('<Q', f.read(8))
            key = f.read(klen).decode('utf-8')
            (vtype,) = struct.unpack('<I', f.read(4))
            if key.endswith('.context_length') and vtype in SCALAR and SCALAR[vtype] in 'IiQq':
                fmt = '<' + SCALAR[vtype]
                pos = f.tell()
                (old,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
                f.seek(pos)
                f.write(struct.pack(fmt, n_ctx))
                print(f'{dst}: {key} {old} -> {n_ctx}')
                return
            skip_value(f, vtype)
    raise SystemExit(f'{src}: no integer *.context_length key')


if __name__ == '__main__':
    main()
