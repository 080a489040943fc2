//! Sizing: hand-computed values, the seed calculator's worked example, properties (monotone in
//! context, no overflow, typed errors), GGUF headers (a truncated file sizes like the whole
//! one), config.json, the shipped catalog, and `boyd size` output (card and JSON snapshots).

use std::path::Path;
use std::process::Command;

use boyd::catalog::Catalog;
use boyd::cli::size::{from_gguf, render_card, render_sweep};
use boyd::runtime::gguf::{GgufHeader, GgufWriter, Value};
use boyd::sizing::{
    self, hf_config, kv_cache, weights, ArchError, ArchParams, Architecture, Estimate, GgmlType,
    Hardware, Input, KvDtype, Quant, SizingError, Weights, DEFAULT_UBATCH,
};
use boyd::units::Bytes;
use proptest::prelude::*;

fn llama3_8b() -> ArchParams {
    ArchParams {
        architecture: Architecture::Llama,
        n_layers: 32,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 128,
        head_dim_v: 128,
        hidden: 4096,
        ffn: 14336,
        vocab: 128_256,
        rope_base: 500_000.0,
        rope_scaling: None,
        norm_eps: 1e-5,
        context_length: 131_072,
        sliding_window: None,
        tied_embeddings: false,
    }
}

fn input(arch: ArchParams, params: u64, quant: &str, ctx: u32) -> Input {
    Input {
        arch,
        weights: Weights::Params {
            params,
            quant: Quant::parse(quant).expect("quant"),
        },
        ctx,
        kv_dtype: KvDtype::F16,
        ubatch: DEFAULT_UBATCH,
    }
}

fn catalog_estimate(name: &str, quant: Option<&str>, ctx: u32, hw: &str) -> Estimate {
    let catalog = Catalog::shipped().expect("catalog");
    let e = catalog.get(name).expect("entry");
    let quant = Quant::parse(quant.unwrap_or(&e.quant)).expect("quant");
    let hw = Hardware::preset(hw).expect("hw");
    sizing::estimate(
        &Input {
            arch: e.arch.clone(),
            weights: Weights::Params {
                params: e.params,
                quant,
            },
            ctx,
            kv_dtype: KvDtype::F16,
            ubatch: DEFAULT_UBATCH,
        },
        &hw,
    )
    .expect("estimate")
}

#[test]
fn llama3_8b_f16_kv_is_131072_bytes_per_token() {
    let kv = kv_cache(&llama3_8b(), KvDtype::F16, 1).expect("kv");
    assert_eq!(kv.per_token, Bytes(131_072));
    assert_eq!(kv.total, Bytes(131_072));
}

#[test]
fn qwen25_32b_q8_0_kv_at_32k_is_hand_computed() {
    // Qwen2.5-32B: 64 layers, 8 KV heads x 128. One row = 1024 values = 32 Q8_0 blocks x 34 B
    // = 1088 B; K+V x 64 layers = 139,264 B per token; x 32,768 = 4,563,402,752 B.
    let e = catalog_estimate("qwen2.5-32b", None, 32_768, "h100-sxm");
    assert_eq!(
        (e.arch.n_layers, e.arch.n_kv_heads, e.arch.head_dim),
        (64, 8, 128)
    );
    let kv = kv_cache(&e.arch, KvDtype::Q8_0, 32_768).expect("kv");
    assert_eq!(kv.per_token, Bytes(139_264));
    assert_eq!(kv.total, Bytes(4_563_402_752));
}

#[test]
fn worked_example_70b_on_128gb_apple_fits_and_states_efficiency() {
    let arch = ArchParams {
        n_layers: 80,
        n_heads: 64,
        hidden: 8192,
        ffn: 28_672,
        ..llama3_8b()
    };
    let hw = Hardware::preset("m3-max").expect("hw");
    let e = sizing::estimate(&input(arch, 70_000_000_000, "4.5", 8192), &hw).expect("estimate");
    assert!(
        (e.memory.weights.gb() - 39.5).abs() < 0.2,
        "{}",
        e.memory.weights.gb()
    );
    assert_eq!(e.memory.kv_cache.gib(), 2.5);
    assert!(e.fits);
    let card = render_card("dense-70b", &e);
    assert!(card.contains("FITS on m3-max"), "{card}");
    assert!(card.contains("of 400.0 GB/s bandwidth"), "{card}");
    // The card names the published rows its speed terms rest on.
    assert!(
        card.contains("efficiency: fit to") && card.contains("published for metal"),
        "{card}"
    );
    assert!(card.contains("m1-max, m2-ultra, m3-max"), "{card}");
    assert!(card.contains("KV cache              2.50 GiB"), "{card}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn memory_and_kv_are_monotone_in_context(
        layers in 1u32..128,
        kv_heads in 1u32..16,
        group in 1u32..8,
        head_dim in prop::sample::select(vec![64u32, 96, 128, 256]),
        window in prop::option::of(16u32..8192),
        gemma in any::<bool>(),
        a in 1u32..200_000,
        b in 1u32..200_000,
        kv in prop::sample::select(KvDtype::ALL.to_vec()),
    ) {
        let arch = ArchParams {
            architecture: if gemma { Architecture::Gemma3 } else { Architecture::Llama },
            n_layers: layers,
            n_heads: kv_heads * group,
            n_kv_heads: kv_heads,
            head_dim,
            head_dim_v: head_dim,
            sliding_window: window,
            context_length: 1 << 20,
            ..llama3_8b()
        };
        let (lo, hi) = (a.min(b), a.max(b));
        let k_lo = kv_cache(&arch, kv, lo).expect("kv");
        let k_hi = kv_cache(&arch, kv, hi).expect("kv");
        prop_assert!(k_lo.total <= k_hi.total);
        prop_assert!(k_lo.total.0 <= k_lo.per_token.0 * u64::from(lo));
        let hw = Hardware::preset("h200").expect("hw");
        let mut i = input(arch, 1_000_000_000, "Q4_K_M", lo);
        i.kv_dtype = kv;
        let e_lo = sizing::estimate(&i, &hw).expect("estimate");
        i.ctx = hi;
        let e_hi = sizing::estimate(&i, &hw).expect("estimate");
        prop_assert!(e_lo.memory.total <= e_hi.memory.total);
        prop_assert!(e_lo.speed.decode_at_ctx >= e_hi.speed.decode_at_ctx);
    }

    #[test]
    fn huge_inputs_never_panic_or_wrap(
        layers in 1u32..=u32::MAX,
        heads in 1u32..=u32::MAX,
        head_dim in 1u32..=u32::MAX,
        hidden in 1u32..=u32::MAX,
        vocab in 1u32..=u32::MAX,
        ctx in 1u32..=u32::MAX,
        params in any::<u64>(),
    ) {
        let arch = ArchParams {
            n_layers: layers,
            n_heads: heads,
            n_kv_heads: heads,
            head_dim: head_dim.next_multiple_of(32).max(32),
            head_dim_v: head_dim.next_multiple_of(32).max(32),
            hidden,
            ffn: hidden,
            vocab,
            context_length: ctx,
            ..llama3_8b()
        };
        let hw = Hardware::preset("h200").expect("hw");
        match sizing::estimate(&input(arch.clone(), params, "F16", ctx), &hw) {
            Ok(e) => {
                // No wrap-around: the total is at least each term.
                prop_assert!(e.memory.total >= e.memory.kv_cache);
                prop_assert!(e.memory.total >= e.memory.weights);
            }
            Err(SizingError::Overflow { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
        match kv_cache(&arch, KvDtype::Q8_0, ctx) {
            Ok(kv) => prop_assert!(kv.total.0 >= u64::from(ctx)),
            Err(SizingError::Overflow { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    #[test]
    fn kv_heads_not_dividing_heads_is_an_error(heads in 2u32..512, kv in 2u32..512) {
        prop_assume!(heads % kv != 0);
        let arch = ArchParams { n_heads: heads, n_kv_heads: kv, ..llama3_8b() };
        let err = kv_cache(&arch, KvDtype::F16, 16).expect_err("must not divide");
        prop_assert_eq!(
            err,
            SizingError::Arch(ArchError::KvHeadsDoNotDivide { n_heads: heads, n_kv_heads: kv })
        );
    }
}

#[test]
fn zero_heads_is_an_error_everywhere() {
    let hw = Hardware::preset("h200").expect("hw");
    for field in ["n_heads", "n_kv_heads", "n_layers", "head_dim"] {
        let mut arch = llama3_8b();
        match field {
            "n_heads" => arch.n_heads = 0,
            "n_kv_heads" => arch.n_kv_heads = 0,
            "n_layers" => arch.n_layers = 0,
            _ => arch.head_dim = 0,
        }
        assert_eq!(
            kv_cache(&arch, KvDtype::F16, 16),
            Err(SizingError::Arch(ArchError::Zero { field })),
            "{field}"
        );
        assert!(sizing::estimate(&input(arch, 1, "Q8_0", 16), &hw).is_err());
    }
}

/// A small llama GGUF: metadata, a Q8_0 embedding, one F32 norm, one Q4_0 matrix, Q6_K output.
fn tiny_gguf() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", Value::String("llama".into()))
        .kv("general.file_type", Value::U32(7))
        .kv("llama.block_count", Value::U32(1))
        .kv("llama.attention.head_count", Value::U32(4))
        .kv("llama.attention.head_count_kv", Value::U32(2))
        .kv("llama.embedding_length", Value::U32(256))
        .kv("llama.feed_forward_length", Value::U32(512))
        .kv("llama.context_length", Value::U32(2048))
        .kv("llama.vocab_size", Value::U32(64));
    let q8 = GgmlType::Q8_0;
    let embd = vec![0u8; q8.tensor_bytes(256 * 64).expect("bytes") as usize];
    let norm = vec![0u8; 256 * 4];
    let q4 = vec![0u8; GgmlType::Q4_0.tensor_bytes(256 * 512).expect("bytes") as usize];
    let out = vec![0u8; GgmlType::Q6_K.tensor_bytes(256 * 64).expect("bytes") as usize];
    w.tensor("token_embd.weight", q8, &[256, 64], &embd)
        .tensor("blk.0.attn_norm.weight", GgmlType::F32, &[256], &norm)
        .tensor("blk.0.ffn_up.weight", GgmlType::Q4_0, &[256, 512], &q4)
        .tensor("output.weight", GgmlType::Q6_K, &[256, 64], &out);
    w.to_bytes()
}

/// Write `bytes[..len]` to a temporary `.gguf` and size it.
fn size_prefix(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    len: usize,
) -> (ArchParams, sizing::WeightBytes, String) {
    let path = dir.join(name);
    std::fs::write(&path, &bytes[..len]).expect("write");
    from_gguf(&path).expect("size")
}

#[test]
fn gguf_truncated_after_tensor_table_sizes_like_the_whole_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = tiny_gguf();
    let header =
        GgufHeader::read(&bytes[..], bytes.len() as u64, Default::default()).expect("header");
    let data_start = header.data_start as usize;
    let whole = size_prefix(dir.path(), "whole.gguf", &bytes, bytes.len());
    let cut = size_prefix(dir.path(), "cut.gguf", &bytes, data_start);
    assert_eq!(whole, cut);
    let (arch, w, label) = whole;
    assert_eq!(
        (arch.n_heads, arch.n_kv_heads, arch.head_dim, arch.vocab),
        (4, 2, 64, 64)
    );
    assert_eq!(label, "Q8_0", "general.file_type 7");
    let expect_embd = 256 * 64 / 32 * 34;
    let expect_out = 256 * 64 / 256 * 210;
    let expect_layers = 256 * 4 + 256 * 512 / 32 * 18;
    assert_eq!(w.token_embd, Bytes(expect_embd));
    assert_eq!(w.output, Bytes(expect_out));
    assert_eq!(w.layers, Bytes(expect_layers));
    assert_eq!(w.total.0, header.tensor_bytes());
    assert!(!w.tied);
}

#[test]
fn gguf_cut_inside_the_tensor_table_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = tiny_gguf();
    let header =
        GgufHeader::read(&bytes[..], bytes.len() as u64, Default::default()).expect("header");
    for len in [
        0,
        3,
        16,
        header.data_start as usize / 2,
        header.data_start as usize - 40,
    ] {
        let path = dir.path().join(format!("cut{len}.gguf"));
        std::fs::write(&path, &bytes[..len]).expect("write");
        assert!(from_gguf(&path).is_err(), "prefix of {len} bytes");
    }
}

#[test]
fn smollm2_exact_weight_bytes_equal_the_sum_of_its_tensors() {
    let Some(path) = crate::common::smollm2() else {
        return;
    };
    let header = GgufHeader::read_path(&path).expect("header");
    let (arch, w, label) = from_gguf(&path).expect("size");
    let sum: u64 = header
        .tensors
        .iter()
        .map(|t| t.ggml_type.tensor_bytes(t.elems()).expect("bytes"))
        .sum();
    assert_eq!(w.total, Bytes(sum));
    assert_eq!(w.total.0, header.tensor_bytes());
    assert!(w.tied, "SmolLM2 ties its output to the embedding");
    assert_eq!(w.params, 134_515_008, "catalog params");
    assert_eq!(label, "Q4_1");
    assert_eq!(
        arch,
        Catalog::shipped()
            .expect("catalog")
            .get("smollm2-135m-instruct")
            .expect("entry")
            .arch
    );
    // Only the header is read: a copy cut at the data section sizes identically.
    let dir = tempfile::tempdir().expect("tempdir");
    let cut = dir.path().join("cut.gguf");
    let mut f = std::fs::File::open(&path).expect("open");
    let mut out = std::fs::File::create(&cut).expect("create");
    std::io::copy(
        &mut std::io::Read::take(&mut f, header.data_start),
        &mut out,
    )
    .expect("copy");
    drop(out);
    assert_eq!(from_gguf(&cut).expect("size").1, w);
}

#[test]
fn every_shipped_entry_has_a_consistent_shape() {
    let catalog = Catalog::shipped().expect("catalog");
    // Shapes from config.json; every one also pins a GGUF in `[source]`.
    let from_config = [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.2-1b",
        "llama-3.2-3b",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "qwen2.5-7b",
        "qwen2.5-14b",
        "qwen2.5-32b",
        "qwen2.5-72b",
        "qwen3-0.6b",
        "qwen3-4b",
        "qwen3-8b",
        "qwen3-32b",
        "mistral-7b",
        "gemma-3-4b",
        "gemma-3-12b",
        "gemma-3-27b",
        "phi-3-mini",
        "smollm2-1.7b",
    ];
    for name in from_config {
        let e = catalog
            .get(name)
            .unwrap_or_else(|| panic!("missing {name}"));
        e.arch
            .validate()
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(e.arch.param_count(), Some(e.params), "{name}");
        let quant = Quant::parse(&e.quant).unwrap_or_else(|err| panic!("{name}: {err}"));
        // A pinned file's size over the parameter count is the quantization's bits per weight,
        // give or take the header, a larger mix for some tensors and an untied output matrix
        // (up to 1.3x for the smallest Qwen2.5 files): a mistyped size or quant fails here.
        let src = e
            .source
            .as_ref()
            .unwrap_or_else(|| panic!("{name} lost its pinned file"));
        let ratio = src.size as f64 * 8.0 / e.params as f64 / quant.bits_per_weight;
        assert!((0.9..=1.35).contains(&ratio), "{name}: {ratio:.3}");
    }
    // Published parameter counts (model cards / safetensors index) pin the shapes.
    for (name, params) in [
        ("llama-3.1-8b", 8_030_261_248u64),
        ("llama-3.1-70b", 70_553_706_496),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-72b", 72_706_203_648),
        ("mistral-7b", 7_248_023_552),
        ("phi-3-mini", 3_821_079_552),
        ("smollm2-1.7b", 1_711_376_384),
    ] {
        assert_eq!(catalog.get(name).expect("entry").params, params, "{name}");
    }
}

#[test]
fn config_json_sizes_like_the_catalog_entry() {
    let text = r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "head_dim": 128,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 32768}"#;
    let m = hf_config::parse(text).expect("parse");
    let entry = Catalog::shipped()
        .expect("catalog")
        .get("mistral-7b")
        .expect("entry")
        .clone();
    assert_eq!(m.arch, entry.arch);
    assert_eq!(m.params, entry.params);
}

#[test]
fn weights_from_tensors_matches_header_for_mixed_types() {
    let bytes = tiny_gguf();
    let header =
        GgufHeader::read(&bytes[..], bytes.len() as u64, Default::default()).expect("header");
    let w = weights::from_tensors(
        header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.ggml_type, t.dims.as_slice())),
    )
    .expect("weights");
    let sum: u64 = header.tensors.iter().map(|t| t.bytes).sum();
    assert_eq!(w.total, Bytes(sum));
}

#[test]
fn card_snapshot_llama31_8b_on_h200() {
    let e = catalog_estimate("llama-3.1-8b", None, 8192, "h200");
    insta::assert_snapshot!(render_card("llama-3.1-8b", &e));
}

#[test]
fn json_snapshot_llama31_8b_on_h200() {
    let e = catalog_estimate("llama-3.1-8b", None, 8192, "h200");
    insta::assert_json_snapshot!(e);
}

#[test]
fn sweep_snapshot_qwen25_7b_on_rtx4090() {
    let es: Vec<Estimate> = [512, 8192, 32_768]
        .into_iter()
        .map(|c| catalog_estimate("qwen2.5-7b", Some("Q4_K_M"), c, "rtx-4090"))
        .collect();
    insta::assert_snapshot!(render_sweep("qwen2.5-7b", &es));
}

fn boyd(args: &[&str], home: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(args)
        .env("BOYD_HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("run boyd")
}

#[test]
fn cli_sizes_a_catalog_name_and_a_config_json_offline() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = boyd(
        &[
            "size", "qwen3-8b", "--hw", "a100-80", "--ctx", "4096", "--json",
        ],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["ctx"], 4096);
    assert_eq!(v["quant"], "Q4_K_M");
    assert_eq!(v["fits"], true);
    // 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 4096 tokens.
    assert_eq!(v["memory"]["kv_cache"], 36u64 * 8 * 128 * 2 * 2 * 4096);

    let cfg = home.path().join("config.json");
    std::fs::write(
        &cfg,
        r#"{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
            "max_position_embeddings": 131072, "tie_word_embeddings": true, "vocab_size": 128256}"#,
    )
    .expect("write");
    let cfg = cfg.to_str().expect("utf-8 path");
    let out = boyd(
        &[
            "size",
            cfg,
            "--quant",
            "Q8_0",
            "--hw",
            "m4-pro",
            "--sweep",
            "ctx=1k,8k",
        ],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1024") && text.contains("8192"), "{text}");

    let out = boyd(&["size", cfg], home.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--quant"));

    let out = boyd(&["size", "no-such-model", "--hw", "h200"], home.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-model") && !err.contains("panicked"),
        "{err}"
    );

    let out = boyd(
        &["size", "qwen3-8b", "--kv-dtype", "q5_1", "--hw", "h200"],
        home.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("q8_0"));
}

#[test]
fn published_dataset_summary_snapshot() {
    let ds = sizing::published::Dataset::shipped().expect("dataset");
    let s = ds.summary();
    assert!(s.speed_rows >= 60, "{}", s.speed_rows);
    insta::assert_json_snapshot!(s);
}

#[test]
fn check_published_meets_the_decode_and_memory_targets_it_reports() {
    let ds = sizing::published::Dataset::shipped().expect("dataset");
    let c = sizing::published::check(&ds).expect("check");
    // Every usable row is predicted, held out by device.
    let scored = c.rows.iter().filter(|r| r.row.outlier.is_none()).count();
    assert_eq!(scored, ds.speed.len() - c.summary.outliers);
    for r in &c.rows {
        assert!(r.held_out.is_finite() && r.held_out > 0.0, "{r:?}");
    }
    // Decode, leave-one-device-out: the median meets the 15 % target and the worst row the
    // 35 % one.
    let all = &c.errors["all tg"];
    assert!(all.median_abs <= 0.15, "{all:?}");
    assert!(all.worst_abs <= 0.35, "{all:?}");
    // Memory terms against the load reports: within 5 %.
    assert!(!c.memory.is_empty());
    for m in &c.memory {
        assert!(m.error.abs() <= 0.05, "{m:?}");
    }
    // Depth sweeps exist for every device; held out by device, each slowdown from the short
    // to the long run is within 10 percentage points of the published one.
    assert!(c.depth.len() >= 8);
    for d in &c.depth {
        assert!(d.published > 0.0 && d.predicted > 0.0, "{d:?}");
        assert!((d.predicted - d.published).abs() <= 0.10, "{d:?}");
    }
    // Published partial-offload runs (-ngl splits on a GPU that has no speed rows): at least
    // five, each predicted within 25 %.
    assert!(c.offload.len() >= 5, "{}", c.offload.len());
    for o in &c.offload {
        assert!(o.error.abs() <= 0.25, "{o:?}");
    }
    assert!(c.offload_error.is_some());
}

#[test]
fn presets_take_their_speed_terms_from_the_published_fit() {
    let ds = sizing::published::Dataset::shipped().expect("dataset");
    let specs = sizing::hardware::PresetSpecs::shipped().expect("specs");
    for (preset, backend) in [
        ("rtx-4090", sizing::Backend::Cuda),
        ("m3-max", sizing::Backend::Metal),
    ] {
        // Recompute the fit from the rows and compare with what the preset carries.
        let fit = sizing::published::fit_backend(&ds.speed, backend, &specs).expect("fit");
        let hw = Hardware::preset(preset).expect("preset");
        assert_eq!(hw.speed, fit.speed_params(), "{preset}");
        assert!(fit.decode_rows >= 40 && fit.prefill_rows >= 40, "{fit:?}");
    }
    // The CPU keeps its hand-set constants (no published CPU rows).
    let cpu = sizing::Backend::Cpu.default_speed();
    assert_eq!(cpu, sizing::Backend::Cpu.handset_speed());
}

#[test]
fn cli_check_published_prints_every_row_and_the_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = boyd(&["size", "--check-published"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("leave-one-device-out"), "{text}");
    assert!(text.contains("median |error|"), "{text}");
    assert!(
        text.contains("partial offload") && text.contains("rtx-5060-ti"),
        "{text}"
    );
    assert!(text.contains("sweeps within 10 points"), "{text}");
    assert!(
        text.contains("rtx-4090") && text.contains("m2-ultra"),
        "{text}"
    );
    let out = boyd(&["size", "--check-published", "--json"], home.path());
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["rows"].as_array().is_some_and(|r| r.len() >= 60));
    assert!(v["errors"]["all tg"]["median_abs"].as_f64().is_some());
    assert!(v["offload"].as_array().is_some_and(|r| r.len() >= 5));
}
