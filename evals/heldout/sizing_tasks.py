"""Held-out tasks: sizing in users' words, and questions about this machine (written by hand).

Every sizing task has `#` comment lines with the `boyd size` command it was checked against and
what that printed (release build of main at 200c579, 2026-12-04). Hardware named the way people
write it maps to a preset (`--hw`) or, when no preset matches, to a preset of the same kind with
the stated memory (`--mem-gib`): "a 16 GB GPU" and "24 GB of GPU memory" are CUDA devices with
that memory; "RTX 3060 12 GB" is a CUDA device with 12 GiB (only fits, totals and memory-bound
answers are asked of it, which do not depend on bandwidth); "MacBook Pro M3 Max 64 GB" is the
m3-max preset (400 GB/s) with 64 GiB. Tolerances: memory 8 % of either the GiB or the GB figure,
largest context 10 %, decode speed 20 % of the empty-context figure (the tasks name no context,
and the figure at 8192 tokens is outside that band and rejected).
"""

from common import NO, YES, all_of, any_of, has, no, num, rx, task


def mem(gib, gb, frac=0.08):
    """A memory figure in GiB or in decimal GB, within `frac`."""
    return any_of(num(gib, round(gib * frac, 2)), num(gb, round(gb * frac, 2)))


def fits_yes(*extra):
    """A yes answer: says it fits, never that it does not."""
    return all_of(rx(YES), no("not fit"), no("n't fit"), no("too big"), no("too large"), *extra)


def fits_no(*extra):
    """A no answer: says no, never yes."""
    return all_of(rx(NO), no("yes"), *extra)


def sizing():
    """KV cache alone, weights alone, totals, fits, speed at empty context, largest context, family."""
    return [
        task("sz-kv-llama8b-32k", "sizing",
             "How much memory does the KV cache alone take for Llama 3.1 8B at 32k tokens of context?",
             all_of(mem(4.0, 4.29), no("14.4"), no("15.5")),
             ok=["4.0 GiB", "about 4.29 GB"], bad=["14.46 GiB", "15.53 GB", "1.0 GiB"], steps=6,
             comment=["boyd size llama-3.1-8b --quant Q4_K_M --ctx 32768 --hw rtx-4090: KV 4.00 GiB (4.29 GB), "
                      "weights 4.58 GiB, total 14.46 GiB (15.53 GB) (KV alone is the same on any device; +-8 %)"]),
        task("sz-kv-qwen7b-16k", "sizing",
             "qwen2.5 7b - how big is the kv cache with a 16,384 token context?",
             all_of(mem(0.88, 0.94), no("8.34"), no("8.96")),
             ok=["0.88 GiB", "about 0.94 GB"], bad=["8.34 GiB", "8.96 GB"], steps=6,
             comment=["boyd size qwen2.5-7b --quant Q4_K_M --ctx 16384 --hw rtx-4090: KV 0.88 GiB (0.94 GB), "
                      "total 8.34 GiB (8.96 GB) (KV alone; +-8 %)"]),
        task("sz-weights-llama70b", "sizing",
             "How big are just the weights of Llama 3.1 70B at Q4_K_M, not counting the cache or anything else?",
             all_of(mem(40.24, 43.21, 0.07), no("46.9"), no("50.4")),
             ok=["40.24 GiB", "about 43.2 GB"], bad=["46.91 GiB", "50.37 GB"], steps=6,
             comment=["boyd size llama-3.1-70b --quant Q4_K_M --ctx 8192 --hw h100-sxm: weights 40.24 GiB (43.21 GB), "
                      "total 46.91 GiB (50.37 GB) (weights alone; +-7 %)"]),
        task("sz-weights-gemma12b-q8", "sizing",
             "Gemma 3 12B quantized to Q8_0: how many GB for the weights alone, no KV cache?",
             all_of(mem(11.66, 12.52), no("15.1"), no("15.2"), no("14.1")),
             ok=["12.52 GB", "11.66 GiB"], bad=["15.16 GB", "14.12 GiB"], steps=6,
             comment=["boyd size gemma-3-12b --quant Q8_0 --ctx 8192 --hw rtx-4090: weights 11.66 GiB (12.52 GB), "
                      "total 14.12 GiB (15.16 GB) (weights alone; +-8 %)"]),
        task("sz-total-qwen14b-4090", "sizing",
             "Total memory needed to run qwen2.5-14b (Q4_K_M, 8k ctx) on an RTX 4090?",
             all_of(mem(12.42, 13.34), no("9.05"), no("8.42")),
             ok=["12.42 GiB", "13.3 GB"], bad=["9.05 GB", "8.42 GiB"], steps=6, hw=True,
             comment=["boyd size qwen2.5-14b --quant Q4_K_M --ctx 8192 --hw rtx-4090: total 12.42 GiB (13.34 GB), "
                      "weights 8.42 GiB (9.05 GB), fits (total; +-8 %)"]),
        task("sz-total-mistral-m2ultra", "sizing",
             "mistral 7b q4_k_m, 32k context, on an M2 Ultra - how much memory all in?",
             all_of(mem(13.34, 14.33), no("7.08"), no("6.59"), no("4.44")),
             ok=["13.34 GiB", "about 14.3 GB"], bad=["6.59 GiB", "4.44 GB"], steps=6, hw=True,
             comment=["boyd size mistral-7b --quant Q4_K_M --ctx 32768 --hw m2-ultra: total 13.34 GiB (14.33 GB), "
                      "weights 4.13 GiB (4.44 GB); at 8192 tokens 6.59 GiB (7.08 GB) (total; +-8 %)"]),
        task("sz-total-mistral-3060", "sizing",
             "How much memory in total would Mistral 7B Q4_K_M with a 4096-token context use on my RTX 3060 12 GB?",
             all_of(mem(6.14, 6.59), no("4.44"), no("4.13")),
             ok=["6.14 GiB", "about 6.6 GB"], bad=["4.44 GB", "4.13 GiB"], steps=6, hw=True,
             comment=["boyd size mistral-7b --quant Q4_K_M --ctx 4096 --hw rtx-3090 --mem-gib 12: total 6.14 GiB "
                      "(6.59 GB), weights 4.13 GiB (4.44 GB), fits (a CUDA device with 12 GiB; total; +-8 %)"]),
        task("sz-fit-qwen32b-24gb-16k", "sizing",
             "I've got 24 GB of GPU memory. Would Qwen2.5-32B at Q4_K_M and a 16k context fit?",
             fits_no(), ok=["No, it needs about 27.1 GiB.", "No."], bad=["Yes, it fits.", "Yes"], steps=6, hw=True,
             comment=["boyd size qwen2.5-32b --quant Q4_K_M --ctx 16384 --hw rtx-4090 --mem-gib 24: total 27.09 GiB "
                      "(29.09 GB), fits=False, max ctx 9275 (no)"]),
        task("sz-fit-llama8b-q8-16gb", "sizing",
             "Can I run Llama 3.1 8B in Q8_0 with 16k context on a 16 GB GPU?",
             fits_yes(), ok=["Yes, it fits: about 13.3 GiB.", "Yes"], bad=["No, it does not fit.", "It won't fit."],
             steps=6, hw=True,
             comment=["boyd size llama-3.1-8b --quant Q8_0 --ctx 16384 --hw rtx-4090 --mem-gib 16: total 13.34 GiB "
                      "(14.33 GB), fits=True, max ctx 26056 (yes)"]),
        task("sz-fit-gemma12b-3060", "sizing",
             "RTX 3060 12 GB here. Will gemma 3 12b at q4_k_m with a 4k context fit?",
             fits_yes(), ok=["Yes, it fits (about 8.5 GiB).", "yes"], bad=["No, it does not fit.", "no"],
             steps=6, hw=True,
             comment=["boyd size gemma-3-12b --quant Q4_K_M --ctx 4096 --hw rtx-3090 --mem-gib 12: total 8.54 GiB "
                      "(9.17 GB), fits=True (yes, for any bandwidth)"]),
        task("sz-fit-llama70b-m3max64-32k", "sizing",
             "My laptop is a 64GB MacBook Pro with the M3 Max. Can it run Llama 3.1 70B Q4_K_M with a 32k context?",
             fits_no(), ok=["No: it needs about 60.6 GiB and only 48 GiB is usable.", "No"],
             bad=["Yes, it fits.", "yes"], steps=6, hw=True,
             comment=["boyd size llama-3.1-70b --quant Q4_K_M --ctx 32768 --hw m3-max --mem-gib 64: total 60.58 GiB "
                      "(65.05 GB), fits=False (usable 75 % of 64 GiB), max ctx 12156 (no)"]),
        task("sz-fit-qwen72b-m2ultra", "sizing",
             "does qwen2.5 72b (q4_k_m, 8k context) fit on an M2 Ultra?",
             fits_yes(), ok=["Yes, it fits: about 46.8 GiB.", "Yes"], bad=["No, it does not fit.", "no"],
             steps=6, hw=True,
             comment=["boyd size qwen2.5-72b --quant Q4_K_M --ctx 8192 --hw m2-ultra: total 46.81 GiB (50.27 GB), "
                      "fits=True (yes)"]),
        task("sz-fit-llama70b-5090", "sizing",
             "Llama-3.1-70B Q4_K_M on a single RTX 5090 with 8192 ctx - does it fit?",
             fits_no(), ok=["No, it needs about 46.9 GiB; the card has 31.8.", "no"], bad=["Yes, it fits.", "yes"],
             steps=6, hw=True,
             comment=["boyd size llama-3.1-70b --quant Q4_K_M --ctx 8192 --hw rtx-5090: total 46.91 GiB (50.37 GB), "
                      "fits=False, max ctx 0 (no)"]),
        task("sz-speed-qwen14b-3090", "sizing",
             "About how many tokens per second does Qwen2.5-14B Q4_K_M put out on an RTX 3090?",
             all_of(num(70.83, 14.17), no("39.7")),
             ok=["about 71 tokens/s", "~70 tok/s"], bad=["39.7 tokens/s", "about 40 tok/s"], steps=6, hw=True,
             comment=["boyd size qwen2.5-14b --quant Q4_K_M --ctx 8192 --hw rtx-3090: decode 70.83 tok/s at empty "
                      "context, 39.68 at 8192 (no context named: empty-context figure, +-20 %)"]),
        task("sz-speed-mistral-m2ultra", "sizing",
             "How fast does Mistral 7B Q4_K_M generate text on an M2 Ultra, in tok/s?",
             all_of(num(78.74, 15.75), no("43.5")),
             ok=["about 79 tok/s", "78.7 tokens per second"], bad=["43.5 tok/s", "17 tok/s"], steps=6, hw=True,
             comment=["boyd size mistral-7b --quant Q4_K_M --ctx 8192 --hw m2-ultra: decode 78.74 tok/s at empty "
                      "context, 43.52 at 8192 (no context named: empty-context figure, +-20 %)"]),
        task("sz-maxctx-llama8b-q8-16gb", "sizing",
             "What's the longest context Llama 3.1 8B at Q8_0 can handle on a 16 GB GPU?",
             all_of(num(26056, 2606), no("131072"), no("131,072"), no("128k")),
             ok=["about 26,000 tokens", "26056 tokens"], bad=["131072 tokens", "128k"], steps=6, hw=True,
             comment=["boyd size llama-3.1-8b --quant Q8_0 --ctx 8192 --hw rtx-4090 --mem-gib 16: max ctx 26056 "
                      "(limited by memory; +-10 %)"]),
        task("sz-maxctx-qwen3-32b-5090", "sizing",
             "max context length for Qwen3 32B Q4_K_M on an RTX 5090?",
             all_of(num(21687, 2169), no("40960"), no("40,960"), no("32768"), no("32,768")),
             ok=["about 21,700 tokens", "21687"], bad=["40960 tokens", "32768"], steps=6, hw=True,
             comment=["boyd size qwen3-32b --quant Q4_K_M --ctx 8192 --hw rtx-5090: max ctx 21687 (memory; "
                      "training context 40960; +-10 %)"]),
        task("sz-family-qwen25-3060", "sizing",
             "What's the biggest Qwen2.5 model I can run at Q4_K_M with a 16k context on an RTX 3060 12 GB? "
             "Just the model name, please.",
             all_of(rx(r"(?i)\b7\s?b\b"), no("14b"), no("14 b"), no("32b"), no("72b")),
             ok=["qwen2.5-7b", "Qwen2.5 7B"], bad=["qwen2.5-14b", "Qwen2.5-32B"], steps=8, hw=True,
             comment=["boyd size qwen2.5-7b --quant Q4_K_M --ctx 16384 --hw rtx-3090 --mem-gib 12: total 8.34 GiB, fits=True",
                      "boyd size qwen2.5-14b --quant Q4_K_M --ctx 16384 --hw rtx-3090 --mem-gib 12: total 15.49 GiB, "
                      "fits=False (and 32b 27.09, 72b 53.17: no) -> 7B"]),
        task("sz-family-gemma3-16gb", "sizing",
             "Which is the largest Gemma 3 model that fits on a 16 GB GPU, Q4_K_M, 8k of context? Name only.",
             all_of(rx(r"(?i)\b12\s?b\b"), no("27b"), no("27 b")),
             ok=["gemma-3-12b", "Gemma 3 12B"], bad=["gemma-3-27b", "Gemma 3 4B"], steps=8, hw=True,
             comment=["boyd size gemma-3-12b --quant Q4_K_M --ctx 8192 --hw rtx-4090 --mem-gib 16: total 9.17 GiB, fits=True",
                      "boyd size gemma-3-27b --quant Q4_K_M --ctx 8192 --hw rtx-4090 --mem-gib 16: total 18.84 GiB, "
                      "fits=False -> 12B"]),
        task("sz-family-llama-m3max64", "sizing",
             "Largest Llama 3 model from the catalog that fits on an M3 Max MacBook Pro (64 gigs), Q4_K_M and a "
             "32k context? just the name",
             all_of(rx(r"(?i)\b8\s?b\b"), no("70b"), no("70 b")),
             ok=["llama-3.1-8b", "Llama 3.1 8B"], bad=["llama-3.1-70b", "Llama 3.2 3B"], steps=8, hw=True,
             comment=["boyd size llama-3.1-8b --quant Q4_K_M --ctx 32768 --hw m3-max --mem-gib 64: total 13.79 GiB, fits=True",
                      "boyd size llama-3.1-70b --quant Q4_K_M --ctx 32768 --hw m3-max --mem-gib 64: total 60.58 GiB, "
                      "fits=False -> 8B"]),
    ]


def this_machine():
    """Questions about the host: checks that hold on any machine the eval runs on."""
    refuse = [no("don't have access"), no("do not have access"), no("cannot access")]
    return [
        task("tm-cpu-cores", "this_machine",
             "How many CPU cores does this machine have?",
             all_of(rx(r"(?i)\b\d{1,3}\s*(physical\s+|logical\s+)?(cpu\s+)?(cores?|threads?|cpus?|vcpus?|processors?)\b"),
                    *refuse),
             ok=["16 cores", "This machine has 2 CPU cores."], bad=["I don't have access to your hardware."],
             steps=6),
        task("tm-ram", "this_machine",
             "how much RAM does this box have",
             all_of(rx(r"(?i)\b\d+(\.\d+)?\s*(GB|GiB|G|gigabytes?|TB|TiB)\b"), *refuse),
             ok=["125.7 GiB", "about 8 GB of RAM"], bad=["I cannot access the hardware of this machine."], steps=6),
        task("tm-fits-small-model", "this_machine",
             "Could this computer run Llama 3.2 1B at Q4_K_M with a 4k context?",
             fits_yes(*refuse), ok=["Yes, it fits with room to spare.", "yes"], bad=["No, it does not fit."],
             steps=6,
             comment=["boyd size llama-3.2-1b --quant Q4_K_M --ctx 4096 --hw this: total 979.7 MiB (1.03 GB), so yes on "
                      "any machine with 4 GB of memory or more"]),
        task("tm-speed-here", "this_machine",
             "If I ran Qwen2.5 0.5B (Q4_K_M) on this computer, what decode speed should I expect, in tok/s?",
             all_of(rx(r"(?i)\b\d+(\.\d+)?\s*(tok(en)?s?\s*(/|per)\s*s(ec(ond)?)?|t/s)\b"), *refuse),
             ok=["about 95 tokens/s", "~40 tok/s"], bad=["I cannot access this machine."], steps=6),
        task("tm-cpu-model", "this_machine",
             "What CPU is in this machine?",
             all_of(rx(r"(?i)(intel|amd|apple|arm|epyc|xeon|ryzen|core|neoverse|graviton|ampere|\bm[1-4]\b|cortex|"
                       r"aarch64|x86)"), *refuse),
             ok=["AMD EPYC 9654", "An Intel Xeon Platinum 8480+"], bad=["I don't have access to that."], steps=6),
        task("tm-maxctx-here", "this_machine",
             "What's the largest context Llama 3.2 3B at Q4_K_M could use on this machine?",
             all_of(rx(r"(?i)\b\d{1,3}(,?\d{3})+\s*(tokens?)?\b|\b\d+\s*k\b"), *refuse),
             ok=["131072 tokens", "about 128k", "45,311 tokens"], bad=["I cannot access your machine."], steps=6),
    ]
