#!/usr/bin/env python3
"""Reference token ids from llama.cpp for boyd's GGUF tokenizer tests.

Reads a GGUF file's vocabulary only (llama.cpp `vocab_only`, no weights), tokenizes every string
of a corpus the way llama.cpp tokenizes a prompt, and writes the ids as JSON. The output is
pinned under tests/data/ and compared with boyd's tokenizer by `tests/it/tokenizer.rs`.

Each case records two tokenizations:
  ids        llama_tokenize(add_special=True,  parse_special=True)   BOS/EOS as the model asks,
                                                                     <|im_start|> etc. as one id
  ids_plain  llama_tokenize(add_special=False, parse_special=False)  control-token text as text

Backends (the first that imports wins, or pick one with --backend):
  xllamacpp         the prebuilt manylinux wheel of llama.cpp (no compiler needed); its shared
                    object exports llama.cpp's C API, called here through ctypes
  llama-cpp-python  `Llama(path, vocab_only=True).tokenize(...)` (builds llama.cpp from source)

Set up once, in a throw-away venv:
  python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install xllamacpp==2026.10.11549
Then:
  /tmp/llvenv/bin/python scripts/tokenizer-reference.py MODEL.gguf tests/data/tokenizer-corpus.json \
      tests/data/NAME.ids.json
"""

import argparse
import ctypes
import hashlib
import json
import os
import sys


class XllamacppBackend:
    """llama.cpp's C API from the xllamacpp wheel's shared object."""

    # Byte offsets in `struct llama_model_params` of the llama.cpp revision in the pinned wheel:
    # devices, tensor_buft_overrides (2 pointers), n_gpu_layers, split_mode, load_mode, lazy_mode,
    # main_gpu (+pad), tensor_split, progress_callback, its user data, kv_overrides (4 pointers),
    # then the bools vocab_only, check_tensors, use_extra_bufts, ...
    OFF_N_GPU_LAYERS = 16
    OFF_VOCAB_ONLY = 72
    OFF_USE_EXTRA_BUFTS = 74

    def __init__(self):
        import xllamacpp  # noqa: F401  (import error -> try the next backend)

        so = os.path.join(os.path.dirname(xllamacpp.__file__), "xllamacpp.abi3.so")
        lib = ctypes.CDLL(so)

        class Params(ctypes.Structure):
            # Opaque and larger than the real struct: returned through a hidden pointer and passed
            # on the stack, so the extra tail is harmless.
            _fields_ = [("raw", ctypes.c_uint8 * 256)]

        lib.llama_backend_init.restype = None
        lib.llama_model_default_params.restype = Params
        lib.llama_model_load_from_file.restype = ctypes.c_void_p
        lib.llama_model_load_from_file.argtypes = [ctypes.c_char_p, Params]
        lib.llama_model_get_vocab.restype = ctypes.c_void_p
        lib.llama_model_get_vocab.argtypes = [ctypes.c_void_p]
        # llama.cpp's log goes through this callback: kept (to check that vocab_only took
        # effect) instead of printed.
        self.log = []
        log_cb_t = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
        self._log_cb = log_cb_t(lambda level, text, user: self.log.append(text.decode("utf-8", "replace")))
        lib.llama_log_set.restype = None
        lib.llama_log_set.argtypes = [log_cb_t, ctypes.c_void_p]
        lib.llama_log_set(self._log_cb, None)
        lib.llama_tokenize.restype = ctypes.c_int32
        lib.llama_tokenize.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.c_bool, ctypes.c_bool,
        ]
        self.lib = lib
        self.Params = Params
        self.version = "xllamacpp " + getattr(xllamacpp, "__version__", "?")

    def load(self, path):
        lib = self.lib
        lib.llama_backend_init()
        p = lib.llama_model_default_params()
        raw = p.raw
        n_gpu_layers = int.from_bytes(bytes(raw[self.OFF_N_GPU_LAYERS:self.OFF_N_GPU_LAYERS + 4]), "little", signed=True)
        if raw[self.OFF_VOCAB_ONLY] != 0 or raw[self.OFF_USE_EXTRA_BUFTS] != 1 or n_gpu_layers != -1:
            sys.exit("llama_model_params layout differs from the one this script knows; "
                     "pin xllamacpp==2026.10.11549 or use --backend llama-cpp-python")
        raw[self.OFF_VOCAB_ONLY] = 1
        self.model = lib.llama_model_load_from_file(path.encode(), p)
        if not self.model:
            sys.exit(f"llama.cpp could not load {path}")
        if not any("vocab only" in line for line in self.log):
            sys.exit("vocab_only did not take effect (llama.cpp did not log 'vocab only')")
        self.vocab = lib.llama_model_get_vocab(self.model)

    def tokenize(self, text, add_special, parse_special):
        b = text.encode("utf-8")
        n = len(b) + 16
        buf = (ctypes.c_int32 * n)()
        k = self.lib.llama_tokenize(self.vocab, b, len(b), buf, n, add_special, parse_special)
        if k < 0:
            n = -k
            buf = (ctypes.c_int32 * n)()
            k = self.lib.llama_tokenize(self.vocab, b, len(b), buf, n, add_special, parse_special)
        if k < 0:
            sys.exit(f"llama_tokenize failed ({k}) on {text!r}")
        return list(buf[:k])


class LlamaCppPythonBackend:
    """llama-cpp-python's high-level API."""

    def __init__(self):
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.version = "llama-cpp-python " + llama_cpp.__version__

    def load(self, path):
        self.llm = self.llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def tokenize(self, text, add_special, parse_special):
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special))


BACKENDS = {"xllamacpp": XllamacppBackend, "llama-cpp-python": LlamaCppPythonBackend}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("corpus", help="JSON file with a list of strings under \"strings\"")
    ap.add_argument("out")
    ap.add_argument("--backend", choices=["auto", *BACKENDS], default="auto")
    args = ap.parse_args()

    backend = None
    names = list(BACKENDS) if args.backend == "auto" else [args.backend]
    errors = []
    for name in names:
        try:
            backend = BACKENDS[name]()
            break
        except ImportError as e:
            errors.append(f"{name}: {e}")
    if backend is None:
        sys.exit("no llama.cpp backend importable: " + "; ".join(errors))

    with open(args.corpus, encoding="utf-8") as f:
        strings = json.load(f)["strings"]
    backend.load(args.gguf)
    cases = [
        {
            "text": s,
            "ids": backend.tokenize(s, True, True),
            "ids_plain": backend.tokenize(s, False, False),
        }
        for s in strings
    ]
    out = {
        "model_file": os.path.basename(args.gguf),
        "model_sha256": sha256(args.gguf),
        "reference": backend.version + " (llama.cpp, vocab_only)",
        "ids": "llama_tokenize(add_special=true, parse_special=true)",
        "ids_plain": "llama_tokenize(add_special=false, parse_special=false)",
        "cases": cases,
    }
    # One case per line keeps the pinned file readable and its diffs small.
    head = {k: v for k, v in out.items() if k != "cases"}
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False, indent=1)[:-2])
        f.write(',\n "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n ]\n}\n")
    print(f"{args.out}: {len(cases)} cases from {out['reference']}")


if __name__ == "__main__":
    main()
