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
        // serde_json has escaped what JSON requires; the fragments between its escapes
        // hold no control character, quote or backslash, so what is left is Go's.
        let bytes = fragment.as_bytes();
        if !needs_escape(bytes) {
            return writer.write_all(bytes);
        }
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            match html_escape_at(bytes, i) {
                Some((escape, len)) => {
                    writer.write_all(&bytes[start..i])?;
                    writer.write_all(escape)?;
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        writer.write_all(&bytes[start..])
    }
}

/// Bytes checked at once by [`block_needs_escape`].
const BLOCK: usize = 16;

/// Whether a block holds anything a Go JSON string escapes: a control character, `"`,
/// `\\`, `&`, `<`, `>`, or 0xE2 (the lead byte of U+2028 and U+2029, also of other
/// characters, which the escaping loop then leaves alone). No branches on a block of
/// fixed size, which the compiler turns into vector compares (fewer instructions, in a
/// count of this crate's typical strings, than the forms that look more direct).
#[inline]
fn block_needs_escape(block: &[u8; BLOCK]) -> bool {
    block.iter().fold(0u8, |acc, &b| {
        acc | u8::from(b < 0x20)
            | u8::from(b == b'"')
            | u8::from(b == b'\\')
            | u8::from(b == b'&')
            | u8::from(b == b'<')
            | u8::from(b == b'>')
            | u8::from(b == 0xE2)
    }) != 0
}

/// The bytes [`block_needs_escape`] looks for, as a table for texts shorter than a block.
static ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'&' as usize] = true;
    table[b'<' as usize] = true;
    table[b'>' as usize] = true;
    table[0xE2] = true;
    table
};

/// Whether `bytes` hold anything [`block_needs_escape`] looks for: block by block, the
/// last block overlapping the one before; a text shorter than a block byte by byte.
fn needs_escape(bytes: &[u8]) -> bool {
    if bytes.len() < BLOCK {
        return bytes.iter().any(|&b| ESCAPED[usize::from(b)]);
    }
    let mut blocks = bytes.chunks_exact(BLOCK);
    let any = blocks
        .by_ref()
        .filter_map(|b| <&[u8; BLOCK]>::try_from(b).ok())
        .any(block_needs_escape);
    any || (!blocks.remainder().is_empty()
        && <&[u8; BLOCK]>::try_from(&bytes[bytes.len() - BLOCK..]).is_ok_and(block_needs_escape))
}

/// The escape Go writes for `&`, `<`, `>`, U+2028 or U+2029 at `bytes[i]`, and how many
/// bytes it replaces.
fn html_escape_at(bytes: &[u8], i: usize) -> Option<(&'static [u8], usize)> {
    match bytes[i] {
        b'&' => Some((b"\\u0026", 1)),
        b'<' => Some((b"\\u003c", 1)),
        b'>' => Some((b"\\u003e", 1)),
        0xE2 if bytes[i + 1..].starts_with(&[0x80, 0xA8]) => Some((b"\\u2028", 3)),
        0xE2 if bytes[i + 1..].starts_with(&[0x80, 0xA9]) => Some((b"\\u2029", 3)),
        _ => None,
    }
}

/// `s` as a JSON string, quoted and escaped as Go's `encoding/json` writes it (what JSON
/// requires, with `\b`, `\f`, `\n`, `\r`, `\t` short and other control characters as
/// `\u00XX`, plus the HTML-safe escapes), appended to `out`. A clean string (most are)
/// is checked sixteen bytes at a time and copied at once.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if needs_escape(bytes) {
        write_escaped(out, bytes);
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
}

/// [`write_str`]'s slow path, byte by byte.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let short = match b {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            0x08 => Some(b'b'),
            0x0C => Some(b'f'),
            b'\n' => Some(b'n'),
            b'\r' => Some(b'r'),
            b'\t' => Some(b't'),
            _ => None,
        };
        let (escape, len): (&[u8], usize) = if let Some(c) = short {
            (&[b'\\', c], 1)
        } else if b < 0x20 {
            (
                &[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xF)],
                ],
                1,
            )
        } else if let Some(found) = html_escape_at(bytes, i) {
            found
        } else {
            i += 1;
            continue;
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        i += len;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
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
    fn write_str_is_what_the_formatter_writes() {
        let cases = [
            String::new(),
            "plain".to_owned(),
            "a&b<c>d \u{2028}\u{2029} \"x\"\\\n\r\t\u{8}\u{c}\u{1}\u{1f}".to_owned(),
            "\u{20ac}\u{2030}é 日本".to_owned(),
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=a%3Db&limit=500"
                .to_owned(),
        ];
        for s in cases {
            let mut ours = Vec::new();
            write_str(&mut ours, &s);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                go(&serde_json::json!(s)),
                "{s:?}"
            );
        }
    }

    #[test]
    fn every_position_of_a_block_is_checked() {
        // Each escaped character at each place of strings around the block size, written
        // by both writers: the block check must see it wherever it falls.
        for len in 0..40 {
            for at in 0..len {
                for c in [
                    '&', '<', '>', '"', '\\', '\n', '\u{1}', '\u{2028}', '\u{20ac}',
                ] {
                    let mut chars = vec!['a'; len];
                    chars[at] = c;
                    let s: String = chars.into_iter().collect();
                    let mut ours = Vec::new();
                    write_str(&mut ours, &s);
                    assert_eq!(String::from_utf8(ours).unwrap(), go(&serde_json::json!(s)));
                }
            }
        }
    }
}
