//! Streaming decode: valid UTF-8 pieces as token ids arrive.

use super::*;

/// Decodes a stream of ids into valid UTF-8 pieces, holding back bytes of a character that is
/// split across tokens. The concatenation of everything it returns (including
/// [`finish`](Self::finish)) equals `decode(all ids, skip_special)`.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    pub(super) tok: &'a GgufTokenizer,
    pub(super) skip_special: bool,
    pub(super) strip: bool,
    pub(super) pending: Vec<u8>,
}

impl StreamDecoder<'_> {
    /// Add one token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.tok
            .push_piece(id, self.skip_special, &mut self.strip, &mut self.pending)?;
        Ok(self.drain_valid())
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Flush what is held back (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    fn drain_valid(&mut self) -> String {
        let mut out = String::new();
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix up to `valid` is UTF-8 by construction.
                    out.push_str(&String::from_utf8_lossy(&rest[..valid]));
                    match e.error_len() {
                        None => {
                            start += valid;
                            break;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start += valid + bad;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }
}
