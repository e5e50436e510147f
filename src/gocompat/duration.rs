//! Go's `time.ParseDuration`
//! (<https://github.com/golang/go/blob/master/src/time/format.go>), with its exact error
//! texts, which kube-apiserver puts in front of users (`?timeout=` errors).

/// Why [`parse_duration`] refused a value: the text of Go's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InvalidDuration(pub(crate) String);

/// Go's `time.ParseDuration`: a possibly signed sequence of decimal numbers, each with an
/// optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), e.g. `300ms`,
/// `-1.5h`, `2h45m`; a bare `0` needs no unit. Returns nanoseconds, as Go's `Duration`.
///
/// The input is bytes, as Go strings are: a query value may hold any byte.
pub(crate) fn parse_duration(s: &[u8]) -> Result<i64, InvalidDuration> {
    let invalid = || InvalidDuration(format!("time: invalid duration {}", time_quote(s)));
    const LIMIT: u64 = 1 << 63;
    let mut rest = s;
    let mut neg = false;
    if let Some((&c, tail)) = rest.split_first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            rest = tail;
        }
    }
    if rest == b"0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while let Some(&first) = rest.first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        // The integer part; overflow is an error.
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut v: u64 = 0;
        for &c in &rest[..digits] {
            if v > LIMIT / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(c - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        rest = &rest[digits..];
        // The fraction; digits past what fits are dropped, as Go does.
        let mut f: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if rest.first() == Some(&b'.') {
            rest = &rest[1..];
            let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            post = n > 0;
            let mut overflow = false;
            for &c in &rest[..n] {
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            rest = &rest[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = rest
            .iter()
            .take_while(|&&c| !(c == b'.' || c.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(InvalidDuration(format!(
                "time: missing unit in duration {}",
                time_quote(s)
            )));
        }
        let (unit_text, tail) = rest.split_at(unit_len);
        rest = tail;
        let unit: u64 = match unit_text {
            b"ns" => 1,
            b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => {
                return Err(InvalidDuration(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(unit_text),
                    time_quote(s)
                )));
            }
        };
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            // Go computes the fraction in float64 and truncates, as here.
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let frac = (f as f64 * (unit as f64 / scale)) as u64;
            v += frac;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        total += v;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        // `total` is at most 2^63, so the negation fits in an i64.
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// The `quote` of Go's time package: `"` + the text + `"`, with `"` and `\` escaped and
/// every byte of a non-ASCII or control character written as `\xNN`.
fn time_quote(s: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if (b' '..0x80).contains(&b) {
            if b == b'"' || b == b'\\' {
                out.push('\\');
            }
            out.push(char::from(b));
            i += 1;
            continue;
        }
        // One character's bytes (an invalid byte counts alone, as Go's RuneError of width 1).
        let width = utf8_width(&s[i..]);
        for &byte in &s[i..i + width] {
            out.push_str("\\x");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        i += width;
    }
    out.push('"');
    out
}

/// The length of the UTF-8 character at the start of `s`, or 1 for an invalid byte.
fn utf8_width(s: &[u8]) -> usize {
    let want = match s.first() {
        Some(b) if *b < 0x80 => return 1,
        Some(b) if b & 0xe0 == 0xc0 => 2,
        Some(b) if b & 0xf0 == 0xe0 => 3,
        Some(b) if b & 0xf8 == 0xf0 => 4,
        _ => return 1,
    };
    match s.get(..want).map(std::str::from_utf8) {
        Some(Ok(_)) => want,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn durations_go_accepts() {
        // Rows of Go's time package `parseDurationTests`.
        for (text, nanos) in [
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600_000_000),
            ("5.s", 5 * S),
            (".5s", S / 2),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4_000_000),
            ("1.0040s", S + 4_000_000),
            ("100.00100s", 100 * S + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14 * S),
            ("15m", 15 * 60 * S),
            ("16h", 16 * 3600 * S),
            ("3h30m", (3 * 3600 + 30 * 60) * S),
            ("10.5s4m", 4 * 60 * S + 10 * S + S / 2),
            ("-2m3.4s", -(2 * 60 * S + 3 * S + 400_000_000)),
            (
                "1h2m3s4ms5us6ns",
                3600 * S + 2 * 60 * S + 3 * S + 4_000_000 + 5_000 + 6,
            ),
            (
                "39h9m14.425s",
                39 * 3600 * S + 9 * 60 * S + 14 * S + 425_000_000,
            ),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * 60 * S),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * 60 * S),
            (
                "0.830103483285477580700h",
                49 * 60 * S + 48 * S + 372_539_827,
            ),
        ] {
            assert_eq!(parse_duration(text.as_bytes()), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn durations_go_refuses_with_its_messages() {
        for (text, message) in [
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("foo", r#"time: invalid duration "foo""#),
            ("\u{fffd}", r#"time: invalid duration "\xef\xbf\xbd""#),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            ("1\"x", r#"time: unknown unit "\"x" in duration "1\"x""#),
        ] {
            assert_eq!(
                parse_duration(text.as_bytes()),
                Err(InvalidDuration(message.to_owned())),
                "{text:?}"
            );
        }
        // Bytes that are not UTF-8 are quoted one by one.
        assert_eq!(
            parse_duration(b"\x85\x85").unwrap_err().0,
            r#"time: invalid duration "\x85\x85""#
        );
    }
}
