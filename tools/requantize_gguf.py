"""A GGUF's weight matrices requantized to another block format: a real model in a format the
catalog lacks, for measuring what a format's kernels do to its predictions
(benchmarks/fidelity.py; e.g. the int8 prefill matmul, which only Q4_0 / Q4_1 / Q8_0 have).

    python tools/requantize_gguf.py IN.gguf OUT.gguf [--to q4_0] [--keep token_embd.weight,output.weight]

Every 2-D tensor but those kept is dequantized to float32 and quantized to --to (gguf-py's
reference quantizers: what llama.cpp's llama-quantize does without an importance matrix); the
kept ones (the embedding and LM head by default: neither runs through a prefill matmul) and the
1-D ones are copied. Metadata is copied as it is.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter


def copy_metadata(reader: GGUFReader, writer: GGUFWriter) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # the writer writes these itself
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[-1]
            values = [
                bytes(field.parts[i]).decode("utf-8", "surrogatepass")
                if sub == GGUFValueType.STRING
                else field.parts[i].tolist()[0]
                for i in field.data
            ]
            writer.add_array(field.name, values)
        elif kind == GGUFValueType.STRING:
            writer.add_key_value(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"), kind)
        else:
            writer.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], kind)


def requantize(src: Path, out: Path, target: GGMLQuantizationType, keep: set[str]) -> dict:
    reader = GGUFReader(src)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode("utf-8")
    writer = GGUFWriter(str(out), arch)
    copy_metadata(reader, writer)
    counts: dict[str, int] = {}
    for t in reader.tensors:
        if len(t.shape) == 2 and t.name not in keep and t.tensor_type != target:
            values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            writer.add_tensor(t.name, gguf.quants.quantize(values, target), raw_dtype=target)
            counts[target.name] = counts.get(target.name, 0) + 1
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--to", default="q4_0", help="the block format of the requantized matrices")
    parser.add_argument("--keep", default="token_embd.weight,output.weight", help="tensors copied as they are")
    args = parser.parse_args()
    target = GGMLQuantizationType[args.to.upper()]
    print(requantize(args.src, args.out, target, set(filter(None, args.keep.split(",")))))


if __name__ == "__main__":
    main()
