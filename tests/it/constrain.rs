//! Output constraints (llguidance) as the mask link of the sampler chain: whatever the logits,
//! the output is in the grammar's language.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use boyd::agent::parse::parse_action;
use boyd::agent::planner::{
    action_schema, lark_grammar, ConstraintMode, LmPlanner, LmPlannerConfig,
};
use boyd::agent::{Planner, PlannerInput, Toolset};
use boyd::lm::{
    CancelToken, ChatMessage, Constraint, FinishReason, GenRequest, LanguageModel, Role,
    SamplingParams,
};
use boyd::runtime::constrain::{ConstraintError, GrammarVocab, TokenConstraint};
use boyd::runtime::local::LocalModel;
use boyd::runtime::sampling::{Sampler, TokenMask};
use boyd::runtime::session::{Flow, GenOptions};
use boyd::runtime::synth::{self, SynthSpec};
use boyd::sizing::Architecture;
use candle_core::Device;

// ---------------------------------------------------------------------------------------------
// helpers

const EOS: u32 = 256 + 12;

/// 256 byte tokens, a dozen multi-byte ones (so masks are not trivially byte-wise), and an
/// end token.
fn toy_vocab() -> GrammarVocab {
    let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for w in [
        "{\"", "\": ", ", \"", "true", "false", "name", "\"}", "12", "abc", " ", "\\u", "ok",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    words.push(b"<|end|>".to_vec());
    let mut special = vec![false; words.len()];
    special[EOS as usize] = true;
    GrammarVocab::from_words(words, &special, &[EOS]).expect("toy vocabulary")
}

fn toy_bytes(tokens: &[u32]) -> Vec<u8> {
    let extra = [
        "{\"", "\": ", ", \"", "true", "false", "name", "\"}", "12", "abc", " ", "\\u", "ok",
    ];
    let mut out = Vec::new();
    for &t in tokens {
        match t {
            0..=255 => out.push(t as u8),
            t if t < EOS => out.extend_from_slice(extra[(t - 256) as usize].as_bytes()),
            _ => {}
        }
    }
    out
}

/// Drive `c` with random logits (a different draw each step) until it is done, the sampler
/// picks the end token, or `max` tokens. Returns the tokens and whether it ended by itself.
fn random_walk(
    c: &mut dyn TokenConstraint,
    seed: u64,
    max: usize,
    vocab: usize,
) -> (Vec<u32>, bool) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut sampler = Sampler::new(SamplingParams {
        temperature: 1.0,
        seed,
        ..SamplingParams::default()
    });
    let mut out = Vec::new();
    while out.len() < max {
        if c.is_done() {
            return (out, true);
        }
        let mut logits: Vec<f32> = (0..vocab)
            .map(|_| rng.random::<f32>() * 8.0 - 4.0)
            .collect();
        let mask = c.mask().expect("mask");
        let t = sampler
            .sample(&mut logits, &out, Some(mask))
            .expect("the mask allows something");
        if t == EOS {
            return (out, true);
        }
        c.commit(t).expect("a sampled token is accepted");
        out.push(t);
    }
    (out, c.is_done())
}

fn small_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "n": {"type": "integer", "minimum": 0, "maximum": 999},
            "ok": {"type": "boolean"},
            "tag": {"enum": ["a", "b"]}
        },
        "required": ["name", "n", "ok", "tag"],
        "additionalProperties": false
    })
}

/// The value matches `small_schema`, keys in schema order.
fn check_small(v: &Value) {
    let o = v.as_object().expect("an object");
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    assert_eq!(keys, ["name", "n", "ok", "tag"], "keys in schema order");
    let name = o["name"].as_str().expect("name is a string");
    assert!(name.chars().count() <= 8, "name {name:?} too long");
    let n = o["n"].as_u64().expect("n is a non-negative integer");
    assert!(n <= 999);
    assert!(o["ok"].is_boolean());
    assert!(matches!(o["tag"].as_str(), Some("a" | "b")));
}

fn synth_model(dir: &std::path::Path) -> LocalModel {
    let path = dir.join("tiny.gguf");
    synth::write(&SynthSpec::tiny(Architecture::Llama), &path).expect("write synthetic model");
    LocalModel::load(&path, &Device::Cpu, 512).expect("load synthetic model")
}

fn request(constraint: Constraint, temperature: f32, seed: u64, max_tokens: usize) -> GenRequest {
    GenRequest {
        messages: vec![ChatMessage::new(Role::User, "Reply.")],
        sampling: SamplingParams {
            temperature,
            seed,
            ..SamplingParams::default()
        },
        max_tokens,
        stop: Vec::new(),
        constraint: Some(constraint),
    }
}

// ---------------------------------------------------------------------------------------------
// the engine on a toy vocabulary, random logits

#[test]
fn json_schema_output_matches_whatever_the_logits() {
    let vocab = toy_vocab();
    let g = vocab
        .compile(&Constraint::JsonSchema(small_schema()))
        .expect("compiles");
    for seed in 0..60 {
        let mut c = g.clone();
        let (tokens, ended) = random_walk(&mut c, seed, 400, vocab.vocab_size());
        assert!(ended, "seed {seed}: did not finish in 400 tokens");
        let text = String::from_utf8(toy_bytes(&tokens)).expect("UTF-8");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("seed {seed}: {text:?} does not parse: {e}"));
        check_small(&v);
        // The prompt's style: ", " and ": ", no other whitespace outside strings.
        assert!(text.starts_with("{\"name\": \""), "{text}");
        assert!(text.contains(", \"n\": "), "{text}");
    }
}

#[test]
fn a_stated_context_is_the_only_ctx_the_sizing_action_can_carry() {
    // Narrowing rule 1 makes `ctx` an integer enum of the task's context; whatever the logits,
    // the action sizes that context (the model passed 137400 for "an 8192-token context").
    let task = "Does llama-3.1-70b at Q4_K_M with an 8192-token context fit on an m3-max?";
    let tools = boyd::agent::narrow::narrow(&Toolset::builtin(None), task, &[], &[]);
    assert_eq!(
        tools
            .iter()
            .map(|t| t.name().to_string())
            .collect::<Vec<_>>(),
        ["size_model"]
    );
    let vocab = toy_vocab();
    let g = vocab
        .compile(&Constraint::JsonSchema(action_schema(&tools, 12)))
        .expect("compiles");
    let mut finished = 0;
    for seed in 0..30 {
        let mut c = g.clone();
        let (tokens, ended) = random_walk(&mut c, seed, 300, vocab.vocab_size());
        if !ended {
            continue;
        }
        finished += 1;
        let text = String::from_utf8(toy_bytes(&tokens)).expect("UTF-8");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("seed {seed}: {text:?} does not parse: {e}"));
        assert_eq!(v["args"]["ctx"], json!(8192), "seed {seed}: {text}");
        assert_eq!(v["args"]["model"], json!("llama-3.1-70b"), "{text}");
        assert_eq!(v["args"]["hw"], json!("m3-max"), "{text}");
    }
    assert!(finished >= 20, "only {finished} of 30 walks finished");
}

#[test]
fn lark_output_matches_whatever_the_logits() {
    let vocab = toy_vocab();
    let g = vocab
        .compile(&Constraint::Lark(
            "start: \"id-\" /[0-9]{3}/ \"-\" (\"abc\" | \"xyz\")\n".into(),
        ))
        .expect("compiles");
    let re = regex::Regex::new(r"^id-[0-9]{3}-(abc|xyz)$").expect("regex");
    for seed in 0..40 {
        let mut c = g.clone();
        let (tokens, ended) = random_walk(&mut c, seed, 100, vocab.vocab_size());
        assert!(ended && c.is_done(), "seed {seed}: not done");
        let text = String::from_utf8(toy_bytes(&tokens)).expect("UTF-8");
        assert!(re.is_match(&text), "seed {seed}: {text:?}");
    }
}

#[test]
fn a_token_outside_the_mask_is_rejected() {
    let vocab = toy_vocab();
    let mut c = vocab
        .compile(&Constraint::Lark("start: \"yes\" | \"no\"\n".into()))
        .expect("compiles");
    let mask = c.mask().expect("mask").clone();
    assert!(mask.is_allowed(u32::from(b'y')) && mask.is_allowed(u32::from(b'n')));
    assert!(!mask.is_allowed(u32::from(b'x')) && !mask.is_allowed(EOS));
    assert!(matches!(
        c.commit(u32::from(b'x')),
        Err(ConstraintError::Rejected { token: 120 })
    ));
    // The state is unchanged: "no" still goes through and completes the grammar.
    c.commit(u32::from(b'n')).expect("n");
    assert!(!c.is_done());
    c.commit(u32::from(b'o')).expect("o");
    assert!(c.is_done());
}

#[test]
fn bad_grammars_are_typed_errors() {
    let vocab = toy_vocab();
    assert!(matches!(
        vocab.compile(&Constraint::Lark("start: undefined_rule\n".into())),
        Err(ConstraintError::Compile { kind: "lark", .. })
    ));
    assert!(matches!(
        vocab.compile(&Constraint::JsonSchema(json!({"type": "no-such-type"}))),
        Err(ConstraintError::Compile {
            kind: "json_schema",
            ..
        })
    ));
    assert!(matches!(
        GrammarVocab::from_words(vec![b"a".to_vec()], &[false], &[]),
        Err(ConstraintError::Vocabulary(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// through the session and LocalModel, on a synthetic model (random weights)

#[test]
fn synthetic_model_json_output_parses_and_ends_with_constraint_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = synth_model(dir.path());
    for (temperature, seed) in [(0.0, 1), (1.0, 2), (1.0, 3), (1.5, 4)] {
        let req = request(
            Constraint::JsonSchema(small_schema()),
            temperature,
            seed,
            200,
        );
        let mut streamed = String::new();
        let out = model
            .generate(&req, &mut |s| streamed.push_str(s), &CancelToken::new())
            .expect("generate");
        assert_eq!(out.finish, FinishReason::ConstraintDone, "{:?}", out.text);
        assert_eq!(streamed, out.text);
        let v: Value = serde_json::from_str(&out.text)
            .unwrap_or_else(|e| panic!("{:?} does not parse: {e}", out.text));
        check_small(&v);
    }
}

#[test]
fn synthetic_model_lark_output_is_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = synth_model(dir.path());
    let grammar = "start: answer \"!\"\nanswer: \"yes\" | \"no\" | \"maybe\"\n";
    for seed in 0..4 {
        let req = request(Constraint::Lark(grammar.into()), 1.0, seed, 50);
        let out = model
            .generate(&req, &mut |_| {}, &CancelToken::new())
            .expect("generate");
        assert!(
            ["yes!", "no!", "maybe!"].contains(&out.text.as_str()),
            "{:?}",
            out.text
        );
        assert_eq!(out.finish, FinishReason::ConstraintDone);
        assert_eq!(out.usage.generated_tokens, out.text.len());
    }
}

#[test]
fn constraint_done_ends_generation_in_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = synth_model(dir.path());
    let prompt = model.tokenizer().encode("hello", false).expect("encode");
    let opts = GenOptions {
        sampling: SamplingParams::default(),
        max_tokens: 100,
        eos: model.tokenizer().eos_ids(),
    };
    // Token by token (fast-forward off), then with the forced tokens run in one pass: the
    // same output, the same cache, no masks and no decode passes.
    for ff in [false, true] {
        let mut g = model
            .constraint_state(&Constraint::Lark("start: \"ab\"\n".into()))
            .expect("compile");
        model.session_mut().reset();
        model.session_mut().set_fast_forward(ff);
        let mut seen = Vec::new();
        let out = model
            .session_mut()
            .generate_constrained(
                &prompt,
                &opts,
                Some(&mut g),
                &CancelToken::new(),
                &mut |t| {
                    seen.push(t);
                    Flow::Continue
                },
            )
            .expect("generate");
        assert_eq!(out.finish, FinishReason::ConstraintDone, "ff {ff}");
        assert_eq!(out.tokens, vec![u32::from(b'a'), u32::from(b'b')]);
        assert_eq!(seen, out.tokens);
        assert_eq!(g.stats().masks, if ff { 0 } else { 2 });
        assert_eq!(out.usage.forced_tokens, if ff { 2 } else { 0 });
        assert_eq!(out.usage.decode_passes, if ff { 0 } else { 1 });
        assert_eq!(out.usage.prompt_tokens, prompt.len());
        assert_eq!(out.usage.generated_tokens, 2);
        // The last token is emitted but not run, like a stop: the cache ends before it.
        assert_eq!(model.session().cached_tokens().len(), prompt.len() + 1);
    }
}

#[test]
fn fast_forward_gives_the_same_actions_in_fewer_passes() {
    // Greedy agent actions on a synthetic model: forced tokens (keys, tool names) run in
    // batches; the text is the same as token by token, and passes < generated tokens.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = synth_model(dir.path());
    let tools = Toolset::builtin(None);
    let c = Constraint::Lark(lark_grammar(&tools, 40));
    let mut texts = Vec::new();
    for ff in [false, true] {
        model.session_mut().reset();
        model.session_mut().set_fast_forward(ff);
        let out = model
            .generate(
                &request(c.clone(), 0.0, 1, 300),
                &mut |_| {},
                &CancelToken::new(),
            )
            .expect("generate");
        if ff {
            assert!(out.usage.forced_tokens > 0, "{:?}", out.usage);
            assert!(
                out.usage.decode_passes + out.usage.forced_tokens <= out.usage.generated_tokens,
                "{:?}",
                out.usage
            );
        } else {
            assert_eq!(out.usage.forced_tokens, 0);
        }
        texts.push(out.text);
    }
    assert_eq!(texts[0], texts[1]);
}

#[test]
fn agent_action_constraints_on_a_synthetic_model() {
    // Random weights, the real tool set: every output is an action the tolerant parser takes.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = synth_model(dir.path());
    let tools = Toolset::builtin(None);
    for (i, c) in [
        Constraint::JsonSchema(action_schema(&tools, 40)),
        Constraint::Lark(lark_grammar(&tools, 40)),
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 0..3 {
            let req = request(c.clone(), 1.0, seed, 400);
            let out = model
                .generate(&req, &mut |_| {}, &CancelToken::new())
                .expect("generate");
            if out.finish == FinishReason::Length {
                // Random weights may wander inside a long string; what is there is a prefix.
                continue;
            }
            let parsed = parse_action(&out.text)
                .unwrap_or_else(|e| panic!("constraint {i}: {:?}: {e}", out.text));
            assert!(out.text.starts_with("{\"thought\": \""), "{}", out.text);
            let _ = parsed;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// cost of the mask link

#[test]
fn mask_application_cost_on_a_qwen_sized_vocabulary() {
    const N: usize = 151_936;
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // A JSON-string-like mask: most tokens allowed; and a structural one: a handful allowed.
    let mut dense = TokenMask::none(151_665);
    let mut sparse = TokenMask::none(151_665);
    for id in 0..151_665u32 {
        if rng.random::<f32>() < 0.9 {
            dense.allow(id);
        }
        if rng.random::<f32>() < 0.0005 {
            sparse.allow(id);
        }
    }
    let logits: Vec<f32> = (0..N).map(|_| rng.random::<f32>()).collect();
    let reps = 50;
    for (name, mask) in [("dense", &dense), ("sparse", &sparse)] {
        let mut l = logits.clone();
        let t0 = Instant::now();
        for _ in 0..reps {
            l.copy_from_slice(&logits);
            mask.apply(&mut l);
        }
        let bitset = t0.elapsed() / reps;
        // The old per-id predicate, for comparison.
        let pred = |i: u32| mask.is_allowed(i);
        let pred: &dyn Fn(u32) -> bool = &pred;
        let t0 = Instant::now();
        for _ in 0..reps {
            l.copy_from_slice(&logits);
            for (i, x) in l.iter_mut().enumerate() {
                if !pred(i as u32) {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
        let closure = t0.elapsed() / reps;
        eprintln!("{name} mask over {N} logits: bitset {bitset:?}, per-id closure {closure:?}");
        let mut greedy = Sampler::new(SamplingParams::default());
        let t = greedy
            .sample(&mut logits.clone(), &[], Some(mask))
            .expect("allowed");
        assert!(mask.is_allowed(t));
    }
}

// ---------------------------------------------------------------------------------------------
// the agent default model (skipped when absent)

#[test]
fn qwen_constrained_actions_parse() {
    let Some(path) = crate::common::qwen_coder() else {
        return;
    };
    let mut model = LocalModel::load(&path, &Device::Cpu, 4096).expect("load qwen");
    let tools = Toolset::builtin(None);
    let t0 = Instant::now();
    let vocab = GrammarVocab::from_tokenizer(model.tokenizer()).expect("vocab");
    eprintln!(
        "token trie + slicer for {} tokens: {:?}",
        vocab.vocab_size(),
        t0.elapsed()
    );
    let schema = Constraint::JsonSchema(action_schema(&tools, 200));
    let t0 = Instant::now();
    let _ = vocab.compile(&schema).expect("compile");
    eprintln!("compile the action schema: {:?}", t0.elapsed());

    let tasks = [
        "What is 1234 * 5678?",
        "List the files in the workspace.",
        "How much memory does qwen2.5-coder-0.5b need at 4096 context?",
    ];
    for (mode, name) in [
        (ConstraintMode::JsonSchema, "json"),
        (ConstraintMode::Lark, "lark"),
    ] {
        for task in tasks {
            let cancel = CancelToken::new();
            let mut planner = LmPlanner::new(
                &mut model,
                LmPlannerConfig {
                    constraint: mode,
                    ..LmPlannerConfig::default()
                },
            );
            let input = PlannerInput {
                task,
                steps: &[],
                tools: &tools,
                allowed: None,
                cancel: &cancel,
            };
            let out = planner.next(&input).expect("planner");
            eprintln!("{name}: {task} -> {}", out.raw);
            let action = out
                .action
                .unwrap_or_else(|e| panic!("{name}: {:?}: {e}", out.raw));
            assert!(out.raw.starts_with("{\"thought\": \""), "{}", out.raw);
            let _ = action;
        }
    }

    // Mask time per token against decode time per token.
    let req = GenRequest {
        messages: boyd::agent::planner::render_messages(tasks[0], &[], &tools),
        sampling: SamplingParams::default(),
        max_tokens: 256,
        stop: Vec::new(),
        constraint: None,
    };
    let prompt = model.prompt_tokens(&req).expect("prompt");
    let mut g = model.constraint_state(&schema).expect("constraint");
    let opts = GenOptions {
        sampling: SamplingParams::default(),
        max_tokens: 256,
        eos: model.tokenizer().eos_ids(),
    };
    let out = model
        .session_mut()
        .generate_constrained(
            &prompt,
            &opts,
            Some(&mut g),
            &CancelToken::new(),
            &mut |_| Flow::Continue,
        )
        .expect("generate");
    let st = g.stats();
    let per_token = out.usage.decode_s / out.usage.generated_tokens.max(1) as f64;
    eprintln!(
        "qwen: {} tokens, finish {:?}; mask mean {:?}, max {:?}; decode {:.1} ms/token (mask included)",
        out.usage.generated_tokens,
        out.finish,
        st.mean(),
        st.max,
        per_token * 1e3
    );
    assert_eq!(out.finish, FinishReason::ConstraintDone);
}

#[test]
fn smollm2_constrained_actions_parse() {
    let Some(path) = crate::common::smollm2() else {
        return;
    };
    let mut model = LocalModel::load(&path, &Device::Cpu, 4096).expect("load smollm2");
    let tools = Toolset::builtin(None);
    for mode in [ConstraintMode::JsonSchema, ConstraintMode::Lark] {
        let cancel = CancelToken::new();
        let mut planner = LmPlanner::new(
            &mut model,
            LmPlannerConfig {
                constraint: mode,
                ..LmPlannerConfig::default()
            },
        );
        let input = PlannerInput {
            task: "What is 1234 * 5678?",
            steps: &[],
            tools: &tools,
            allowed: None,
            cancel: &cancel,
        };
        let out = planner.next(&input).expect("planner");
        eprintln!("smollm2 {mode:?}: {}", out.raw);
        assert!(out.action.is_ok(), "{mode:?}: {:?}", out.raw);
    }
}
