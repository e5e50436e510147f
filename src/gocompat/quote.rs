//! Go's `strconv.Quote`, the `%q` of `fmt`
//! (<https://github.com/golang/go/blob/master/src/strconv/quote.go>), which upstream
//! messages use for names and paths (`User "alice" cannot get path "/metrics"`).

use std::fmt::Write as _;

/// Go's `%q` for a string (`strconv.Quote`): printable characters kept, the usual
/// backslash escapes, other characters as `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x1_0000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `unicode.IsPrint` without Unicode category tables: controls, spaces
/// other than U+0020, format characters, private-use characters and noncharacters are
/// escaped. Unassigned code points are kept, which Go would escape.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format = matches!(
        u,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(u, 0xE000..=0xF8FF | 0xF_0000..=0xF_FFFD | 0x10_0000..=0x10_FFFD);
    let noncharacter = (0xFDD0..=0xFDEF).contains(&u) || (u & 0xFFFE) == 0xFFFE;
    !(format || private_use || noncharacter)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of Go's `strconv` `quotetests` (valid UTF-8 ones; Rust strings hold no other),
    /// then ours.
    #[test]
    fn quotes_as_strconv_quote() {
        for (input, quoted) in [
            ("\u{7}\u{8}\u{c}\r\n\t\u{b}", r#""\a\b\f\r\n\t\v""#),
            ("\\", r#""\\""#),
            ("\u{263a}", "\"\u{263a}\""),
            ("\u{10ffff}", r#""\U0010ffff""#),
            ("\u{4}", r#""\x04""#),
            ("!\u{a0}!\u{2000}!\u{3000}!", r#""!\u00a0!\u2000!\u3000!""#),
            ("\u{7f}", r#""\x7f""#),
            // Ours: plain text, quotes and backslashes, each escape form, and the escapes
            // an older copy of the Forbidden message's quoting missed.
            ("plain", r#""plain""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            (
                "\u{1}\u{85}\u{a0}\u{200b}\u{feff}",
                r#""\x01\u0085\u00a0\u200b\ufeff""#,
            ),
            ("\u{e0001}", r#""\U000e0001""#),
            ("héllo 世界 🎉", "\"héllo 世界 🎉\""),
            ("a\u{7}b", r#""a\ab""#),
        ] {
            assert_eq!(quote(input), quoted, "{input:?}");
        }
    }
}
