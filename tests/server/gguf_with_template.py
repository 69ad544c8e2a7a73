"""Copies a GGUF model with its chat template replaced (tokenizer.chat_template).

Usage: /usr/bin/python3 tests/server/gguf_with_template.py IN.gguf OUT.gguf TEMPLATE.jinja

For the served reasoning tests: a real model (stories260K) answering through a
reasoning model's template. Uses the project's GGUF reader/writer
(tools/gguf.py: F32/F16 tensors, every metadata type).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools"))
from gguf import GGUFReader, GGUFType, GGUFWriter  # noqa: E402

KEY = "tokenizer.chat_template"


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, template = argv[1:]
    r = GGUFReader(src)
    w = GGUFWriter()
    for key, value in r.metadata.items():
        if key == KEY:
            continue
        vtype, elem = r.metadata_types[key]
        w.add(key, value, vtype, elem if vtype == GGUFType.ARRAY else None)
    with open(template, encoding="utf-8") as f:
        w.add_string(KEY, f.read())
    for ti in r.tensor_infos:
        w.add_tensor(ti.name, r.tensors[ti.name], ti.ggml_type)
    w.write(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
