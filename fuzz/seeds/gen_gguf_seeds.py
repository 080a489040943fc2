"""Write small GGUF seed files for the gguf_header fuzz target (run from fuzz/seeds/)."""
import struct

def s(x: bytes) -> bytes:
    return struct.pack("<Q", len(x)) + x

def kv(key, ty, payload):
    return s(key.encode()) + struct.pack("<I", ty) + payload

U32, F32, BOOL, STR, ARR, I32 = 4, 6, 7, 8, 9, 5

def u32(k, v): return kv(k, U32, struct.pack("<I", v))
def f32(k, v): return kv(k, F32, struct.pack("<f", v))
def st(k, v): return kv(k, STR, s(v.encode()))
def arr_str(k, vs): return kv(k, ARR, struct.pack("<IQ", STR, len(vs)) + b"".join(s(v.encode()) for v in vs))
def arr_i32(k, vs): return kv(k, ARR, struct.pack("<IQ", I32, len(vs)) + b"".join(struct.pack("<i", v) for v in vs))

def gguf(kvs, tensors, data_len):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    for name, dims, ty, off in tensors:
        out += s(name.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ty, off)
    out += b"\0" * ((-len(out)) % 32)
    return out + b"\0" * data_len

h, ffn, vocab = 8, 16, 6
toks = ["a", "b", "c", "ab", "<s>", "</s>"]
kvs = [
    st("general.architecture", "llama"),
    u32("llama.block_count", 1), u32("llama.context_length", 64),
    u32("llama.embedding_length", h), u32("llama.feed_forward_length", ffn),
    u32("llama.attention.head_count", 2), u32("llama.attention.head_count_kv", 1),
    f32("llama.attention.layer_norm_rms_epsilon", 1e-5),
    st("tokenizer.ggml.model", "gpt2"), st("tokenizer.ggml.pre", "default"),
    arr_str("tokenizer.ggml.tokens", toks), arr_i32("tokenizer.ggml.token_type", [1, 1, 1, 1, 3, 3]),
    arr_str("tokenizer.ggml.merges", ["a b"]),
    u32("tokenizer.ggml.bos_token_id", 4), u32("tokenizer.ggml.eos_token_id", 5),
]
names = [("token_embd.weight", [h, vocab]), ("blk.0.attn_norm.weight", [h]),
         ("blk.0.attn_q.weight", [h, h]), ("blk.0.attn_k.weight", [h, h // 2]),
         ("blk.0.attn_v.weight", [h, h // 2]), ("blk.0.attn_output.weight", [h, h]),
         ("blk.0.ffn_norm.weight", [h]), ("blk.0.ffn_gate.weight", [h, ffn]),
         ("blk.0.ffn_up.weight", [h, ffn]), ("blk.0.ffn_down.weight", [ffn, h]),
         ("output_norm.weight", [h])]
tensors, off = [], 0
for n, d in names:
    size = 4
    for x in d:
        size *= x
    tensors.append((n, d, 0, off))
    off += size + (-size) % 32
open("gguf_header/mini-llama.bin", "wb").write(gguf(kvs, tensors, off))
open("gguf_header/header-only.bin", "wb").write(gguf(kvs[:8], tensors[:3], 0))
spm = kvs[:8] + [st("tokenizer.ggml.model", "llama"), arr_str("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>", "\u2581a", "b"]),
                 kv("tokenizer.ggml.scores", ARR, struct.pack("<IQ", F32, 5) + b"".join(struct.pack("<f", -i) for i in range(5)))]
open("gguf_header/spm-vocab.bin", "wb").write(gguf(spm, [], 0))
open("gguf_header/aligned-64.bin", "wb").write(gguf([u32("general.alignment", 64)], [("t", [64], 8, 0)], 68))
