//! The `tokenizers` pipelines (byte-level BPE, SentencePiece-style BPE) and the per-token byte
//! table decoding reads.

use super::load::build_err;
use super::*;

/// GPT-2's reversible byte <-> printable-character map used by byte-level BPE.
pub(super) fn byte_level_alphabet() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let cp = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        // Every value here is below 0x144, a valid scalar value.
        map[b as usize] = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER);
    }
    map
}

/// The byte-level BPE pipeline: isolating regex splits, byte-to-char mapping, ranked merges.
pub(super) fn build_bpe(
    ids: &HashMap<String, u32>,
    merges: &[String],
    pre: PreTokenizerKind,
) -> Result<Tokenizer> {
    let vocab: Vocab = ids.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut seen = std::collections::HashSet::with_capacity(merges.len());
    let mut pairs = Vec::with_capacity(merges.len());
    for m in merges {
        // Split at the first space after the first byte, as llama.cpp does.
        let Some(at) = m
            .as_bytes()
            .iter()
            .skip(1)
            .position(|&b| b == b' ')
            .map(|p| p + 1)
        else {
            continue;
        };
        let (a, b) = (&m[..at], &m[at + 1..]);
        if !ids.contains_key(a) || !ids.contains_key(b) || !ids.contains_key(&format!("{a}{b}")) {
            continue;
        }
        if seen.insert((a, b)) {
            pairs.push((a.to_string(), b.to_string()));
        }
    }
    let model = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .ignore_merges(pre.ignore_merges())
        .build()
        .map_err(build_err)?;
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for p in pre.patterns() {
        let split = Split::new(
            SplitPattern::Regex((*p).to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(build_err)?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    let mut t = Tokenizer::new(model);
    t.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(steps))));
    t.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::new(
        false, false, false,
    ))));
    Ok(t)
}

/// The SentencePiece pipeline: ' ' -> '▁', then BPE whose merges are ranked by the score of
/// the merged token (llama.cpp picks the adjacent pair whose concatenation scores highest),
/// with `<0xXX>` byte fallback.
pub(super) fn build_spm(
    tokens: &[String],
    ids: &HashMap<String, u32>,
    scores: &[f32],
    unk: Option<String>,
) -> Result<Tokenizer> {
    // Every way to write a token as the concatenation of two tokens is a merge.
    let mut cands: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        for (at, _) in t.char_indices().skip(1) {
            if let (Some(&l), Some(&r)) = (ids.get(&t[..at]), ids.get(&t[at..])) {
                cands.push((scores[id], id as u32, l, r));
            }
        }
    }
    cands.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let merges = cands
        .into_iter()
        .map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect();
    let vocab: Vocab = ids.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut b = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true);
    if let Some(u) = unk {
        b = b.unk_token(u);
    }
    let model = b.build().map_err(build_err)?;
    let mut t = Tokenizer::new(model);
    let replace = Replace::new(" ", "▁").map_err(build_err)?;
    t.with_normalizer(Some(NormalizerWrapper::Replace(replace)));
    let decoders = vec![
        DecoderWrapper::Replace(Replace::new("▁", " ").map_err(build_err)?),
        DecoderWrapper::ByteFallback(tokenizers::decoders::byte_fallback::ByteFallback::new()),
        DecoderWrapper::Fuse(tokenizers::decoders::fuse::Fuse::new()),
    ];
    t.with_decoder(Some(DecoderWrapper::Sequence(
        tokenizers::decoders::sequence::Sequence::new(decoders),
    )));
    Ok(t)
}

/// The bytes each token decodes to, as llama.cpp's `token_to_piece` with specials rendered.
pub(super) fn make_pieces(
    kind: VocabKind,
    tokens: &[String],
    types: &[TokenType],
) -> Vec<Box<[u8]>> {
    let alphabet = byte_level_alphabet();
    let mut to_byte: HashMap<char, u8> = HashMap::with_capacity(256);
    for (b, c) in alphabet.iter().enumerate() {
        to_byte.insert(*c, b as u8);
    }
    tokens
        .iter()
        .zip(types)
        .map(|(text, ty)| -> Box<[u8]> {
            match ty {
                TokenType::Control | TokenType::Unknown | TokenType::UserDefined => {
                    text.as_bytes().into()
                }
                TokenType::Normal => match kind {
                    VocabKind::Bpe => {
                        let mut out = Vec::with_capacity(text.len());
                        for c in text.chars() {
                            match to_byte.get(&c) {
                                Some(&b) => out.push(b),
                                None => {
                                    let mut buf = [0u8; 4];
                                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                                }
                            }
                        }
                        out.into()
                    }
                    VocabKind::Spm => text.replace('▁', " ").into_bytes().into(),
                },
                TokenType::Byte if kind == VocabKind::Spm => match parse_byte_token(text) {
                    Some(b) => Box::new([b]),
                    None => text.as_bytes().into(),
                },
                _ => Box::default(),
            }
        })
        .collect()
}

/// `<0xAB>` -> 0xAB.
pub(super) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
