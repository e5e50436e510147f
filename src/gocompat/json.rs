//! Go `encoding/json`'s HTML-safe string escaping, done while serializing: `&`, `<`,
//! `>`, U+2028 and U+2029 inside strings are written as `\u0026`, `\u003c`, `\u003e`,
//! `\u2028` and `\u2029`, as `json.Marshal` (and so every upstream JSON body and audit
//! line) writes them. Serializing through [`GoFormatter`] escapes them in the one pass
//! that writes the document, instead of scanning and copying it again afterwards.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// A compact [`Formatter`] (the trait's defaults are `CompactFormatter`'s) that escapes strings as Go's `encoding/json` does with
/// `SetEscapeHTML(true)`, its default.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let bytes = fragment.as_bytes();
        if !needs_html_escape(bytes) {
            return writer.write_all(bytes);
        }
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let (escape, len): (&[u8], usize) = match bytes[i] {
                b'&' => (b"\\u0026", 1),
                b'<' => (b"\\u003c", 1),
                b'>' => (b"\\u003e", 1),
                0xE2 if bytes[i + 1..].starts_with(&[0x80, 0xA8]) => (b"\\u2028", 3),
                0xE2 if bytes[i + 1..].starts_with(&[0x80, 0xA9]) => (b"\\u2029", 3),
                _ => {
                    i += 1;
                    continue;
                }
            };
            writer.write_all(&bytes[start..i])?;
            writer.write_all(escape)?;
            i += len;
            start = i;
        }
        writer.write_all(&bytes[start..])
    }
}

/// Whether `bytes` hold anything Go escapes beyond what JSON requires: `&`, `<`, `>`, or
/// the lead byte of U+2028 and U+2029 (0xE2, also the lead of other characters, which
/// the escaping loop then leaves alone). Checks 16 bytes at a time without branching,
/// which the compiler turns into vector compares.
pub(crate) fn needs_html_escape(bytes: &[u8]) -> bool {
    let hit = |b: &u8| matches!(*b, b'&' | b'<' | b'>' | 0xE2);
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |any, b| any | hit(b)) {
            return true;
        }
    }
    chunks.remainder().iter().any(hit)
}

/// `value` as compact JSON with Go's escaping, appended to `out`.
pub(crate) fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, GoFormatter);
    value.serialize(&mut ser)
}

/// `value` as Go's encoder writes a document: compact JSON with Go's escaping and a
/// trailing newline, in a buffer of `capacity` to begin with. Empty (no newline either)
/// for a value that does not serialize, which the types given here (string keys only)
/// never are.
pub(crate) fn to_line<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    if write(&mut out, value).is_err() {
        return Vec::new();
    }
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(value: &serde_json::Value) -> String {
        let mut out = Vec::new();
        write(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_as_go_encoding_json_does() {
        // What `json.Marshal` writes for these (Go 1.22).
        let value = serde_json::json!({
            "q": "a&b<c>d \u{2028}\u{2029} \"x\"\\\n\u{1}",
            "e": "\u{20ac}\u{2030}é",
            "<k>": ["&", 1, null, true],
        });
        assert_eq!(
            go(&value),
            concat!(
                r#"{"q":"a\u0026b\u003cc\u003ed \u2028\u2029 \"x\"\\\n\u0001","#,
                "\"e\":\"\u{20ac}\u{2030}é\",",
                r#""\u003ck\u003e":["\u0026",1,null,true]}"#
            )
        );
    }

    #[test]
    fn the_fast_check_sees_every_position() {
        for len in 0..40 {
            let clean = "a".repeat(len);
            assert!(!needs_html_escape(clean.as_bytes()));
            for at in 0..len {
                for c in ['&', '<', '>', '\u{20ac}'] {
                    let mut s: Vec<char> = clean.chars().collect();
                    s[at] = c;
                    let s: String = s.into_iter().collect();
                    assert!(needs_html_escape(s.as_bytes()), "{s:?}");
                }
            }
        }
    }
}
