#!/usr/bin/env python3
"""Write tests/data/spm-test-vocab.gguf.bin: a SentencePiece-style ("llama") vocabulary, no tensors.

(Named .gguf.bin because the repository ignores *.gguf.) boyd's real test models both use byte-level BPE vocabularies, so the SentencePiece path is
checked against llama.cpp on this file instead. Its pieces are derived from a byte-level BPE
GGUF (the first N tokens whose bytes are valid UTF-8, spaces written as U+2581, score = -rank),
plus <unk>, <s>, </s>, the 256 <0xXX> byte tokens, a control token and a user-defined token. The
metadata llama.cpp needs to open the file with vocab_only (architecture, a few hyper-parameters)
is filled with small placeholder values.

  /tmp/llvenv/bin/pip install gguf
  /tmp/llvenv/bin/python scripts/make-spm-test-vocab.py SmolLM2-135M-Instruct.Q4_1.gguf \
      tests/data/spm-test-vocab.gguf.bin
  /tmp/llvenv/bin/python scripts/tokenizer-reference.py tests/data/spm-test-vocab.gguf.bin \
      tests/data/tokenizer-corpus.json tests/data/spm-test-vocab.ids.json
"""

import argparse

import gguf


def byte_level_decoder():
    table, extra = {}, 0
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
            table[chr(b)] = b
        else:
            extra += 1
            table[chr(255 + extra)] = b
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source", help="a GGUF with a gpt2 (byte-level BPE) vocabulary")
    ap.add_argument("out")
    ap.add_argument("--pieces", type=int, default=6000)
    args = ap.parse_args()

    r = gguf.GGUFReader(args.source)
    f = r.fields["tokenizer.ggml.tokens"]
    src_tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    src_types = [int(f.parts[i][0]) for i in f.data]
    dec = byte_level_decoder()

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    seen = set(tokens)
    pieces = []
    for t, ty in zip(src_tokens, src_types):
        if ty != 1 or len(pieces) >= args.pieces:
            continue
        try:
            text = bytes(dec[c] for c in t).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue
        piece = text.replace(" ", "\u2581")
        if piece and piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    # Every character of every piece is itself a piece, as in real SentencePiece models.
    chars = sorted({c for p in pieces for c in p} - seen)
    pieces = pieces + chars
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    for extra, ty in (("<|im_start|>", 3), ("<|im_end|>", 3), ("<tool>", 4)):
        tokens.append(extra)
        types.append(ty)
        scores.append(0.0)

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("boyd spm test vocab")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {len(tokens)} tokens")


if __name__ == "__main__":
    main()
