//! The lexer and parser of apimachinery's label selectors
//! ([`pkg/labels/selector.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/labels/selector.go)),
//! kept byte for byte.

use super::{Invalid, LabelOperator, LabelRequirement};
use crate::gocompat::names;

/// The requirements of `sel` in the order it lists them (upstream's `Parse` then sorts
/// them by key, as `parse_label_selector` does with these).
pub(super) fn requirements(sel: &str) -> Result<Vec<LabelRequirement>, Invalid> {
    Parser {
        lexer: Lexer {
            s: sel.as_bytes(),
            pos: 0,
            done: false,
        },
        peeked: None,
    }
    .parse()
}

/// The tokens of upstream's lexer (`EndOfStringToken`, `ClosedParToken`, ...).
/// `Ident` carries its text beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Eos,
    ClosePar,
    Comma,
    Not,
    DoubleEq,
    Eq,
    Gt,
    Ident,
    In,
    Lt,
    NotEq,
    NotIn,
    OpenPar,
}

/// Upstream's `Lexer`: a byte position over the selector, reading a byte at a time and
/// giving bytes back with `unread`, so its quirks (a NUL ends a token, `!==` lexes as
/// `!=` then `=`) are the same.
struct Lexer<'s> {
    s: &'s [u8],
    pos: usize,
    /// Set once end of input was reported; upstream stops scanning there.
    done: bool,
}

/// The whitespace upstream's lexer skips: space, tab, CR and LF (not other Unicode
/// spaces).
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// A byte that starts an operator or punctuation token and ends an identifier.
fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

impl<'s> Lexer<'s> {
    /// The next byte, or 0 at end of input. A NUL byte is consumed, end is not.
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn lex(&mut self) -> (Tok, &'s [u8]) {
        if self.done {
            return (Tok::Eos, b"");
        }
        let mut b = self.read();
        while is_whitespace(b) {
            b = self.read();
        }
        if b == 0 {
            self.done = true;
            return (Tok::Eos, b"");
        }
        self.unread();
        if is_special(b) {
            self.scan_special()
        } else {
            self.scan_ident()
        }
    }

    fn scan_ident(&mut self) -> (Tok, &'s [u8]) {
        let start = self.pos;
        let end = loop {
            let before = self.pos;
            let b = self.read();
            if b == 0 {
                break before;
            }
            if is_special(b) || is_whitespace(b) {
                self.unread();
                break before;
            }
        };
        let lit = self.s.get(start..end).unwrap_or(b"");
        let tok = match lit {
            b"in" => Tok::In,
            b"notin" => Tok::NotIn,
            _ => Tok::Ident,
        };
        (tok, lit)
    }

    /// Every special byte is a token alone; `==` and `!=` are the only longer ones.
    fn scan_special(&mut self) -> (Tok, &'s [u8]) {
        let first = self.read();
        let mut tok = match first {
            b'=' => Tok::Eq,
            b'!' => Tok::Not,
            b'(' => Tok::OpenPar,
            b')' => Tok::ClosePar,
            b',' => Tok::Comma,
            b'>' => Tok::Gt,
            _ => Tok::Lt,
        };
        let second = self.read();
        if second == 0 {
            return (tok, b"");
        }
        if !is_special(second) {
            self.unread();
            return (tok, b"");
        }
        match (first, second) {
            (b'=', b'=') => tok = Tok::DoubleEq,
            (b'!', b'=') => tok = Tok::NotEq,
            _ => {
                self.unread();
                return (tok, b"");
            }
        }
        let third = self.read();
        if third != 0 {
            self.unread();
        }
        (tok, b"")
    }
}

/// Upstream's `Parser` with one token of lookahead, which it calls `lookahead` and we
/// `peek`.
struct Parser<'s> {
    lexer: Lexer<'s>,
    peeked: Option<(Tok, &'s [u8])>,
}

/// Where `in`/`notin` are read as plain identifiers (everywhere but the operator).
fn as_value(tok: Tok) -> Tok {
    match tok {
        Tok::In | Tok::NotIn => Tok::Ident,
        t => t,
    }
}

impl<'s> Parser<'s> {
    fn peek_raw(&mut self) -> (Tok, &'s [u8]) {
        match self.peeked {
            Some(t) => t,
            None => {
                let t = self.lexer.lex();
                self.peeked = Some(t);
                t
            }
        }
    }

    fn peek(&mut self) -> Tok {
        as_value(self.peek_raw().0)
    }

    fn next_raw(&mut self) -> (Tok, &'s [u8]) {
        let t = self.peek_raw();
        self.peeked = None;
        t
    }

    fn next(&mut self) -> (Tok, &'s [u8]) {
        let (t, lit) = self.next_raw();
        (as_value(t), lit)
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, Invalid> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Tok::Ident | Tok::Not => {
                    out.push(self.requirement()?);
                    match self.next().0 {
                        Tok::Eos => return Ok(out),
                        Tok::Comma => {
                            if !matches!(self.peek(), Tok::Ident | Tok::Not) {
                                return Err(Invalid);
                            }
                        }
                        _ => return Err(Invalid),
                    }
                }
                Tok::Eos => return Ok(out),
                _ => return Err(Invalid),
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelRequirement, Invalid> {
        let (mut tok, mut key) = self.next();
        let negated = tok == Tok::Not;
        if negated {
            (tok, key) = self.next();
        }
        if tok != Tok::Ident || !is_qualified_name(key) {
            return Err(Invalid);
        }
        let key = String::from_utf8_lossy(key).into_owned();
        let req = |operator, values: Vec<String>| LabelRequirement {
            key: key.clone(),
            operator,
            values,
        };
        // `!key` is complete whatever follows; a following operator then fails in
        // `parse` as an unexpected token.
        if negated {
            return Ok(req(LabelOperator::DoesNotExist, Vec::new()));
        }
        if matches!(self.peek(), Tok::Eos | Tok::Comma) {
            return Ok(req(LabelOperator::Exists, Vec::new()));
        }
        let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        match self.next_raw().0 {
            t @ (Tok::In | Tok::NotIn) => {
                let values = self.value_set()?;
                let op = if t == Tok::In {
                    LabelOperator::In
                } else {
                    LabelOperator::NotIn
                };
                Ok(req(op, values))
            }
            t @ (Tok::Eq | Tok::DoubleEq | Tok::NotEq) => {
                let v = self.exact_value()?;
                valid_value(v)?;
                let op = if t == Tok::NotEq {
                    LabelOperator::NotEquals
                } else {
                    LabelOperator::Equals
                };
                Ok(req(op, vec![text(v)]))
            }
            t @ (Tok::Gt | Tok::Lt) => {
                let v = self.exact_value()?;
                let is_int = std::str::from_utf8(v).is_ok_and(|s| s.parse::<i64>().is_ok());
                if !is_int {
                    return Err(Invalid);
                }
                valid_value(v)?;
                let op = if t == Tok::Gt {
                    LabelOperator::GreaterThan
                } else {
                    LabelOperator::LessThan
                };
                Ok(req(op, vec![text(v)]))
            }
            _ => Err(Invalid),
        }
    }

    fn exact_value(&mut self) -> Result<&'s [u8], Invalid> {
        if matches!(self.peek(), Tok::Eos | Tok::Comma) {
            return Ok(b"");
        }
        match self.next() {
            (Tok::Ident, lit) => Ok(lit),
            _ => Err(Invalid),
        }
    }

    /// `( v1, v2, ... )`; empty entries stand for `""`, which is a valid value. The
    /// values come back as upstream's string set lists them: sorted, without repeats.
    fn value_set(&mut self) -> Result<Vec<String>, Invalid> {
        let mut values = std::collections::BTreeSet::new();
        if self.next().0 != Tok::OpenPar {
            return Err(Invalid);
        }
        match self.peek() {
            Tok::ClosePar => {
                self.next();
                values.insert(String::new());
                return Ok(values.into_iter().collect());
            }
            Tok::Ident | Tok::Comma => {}
            _ => return Err(Invalid),
        }
        loop {
            match self.next() {
                (Tok::Ident, lit) => {
                    valid_value(lit)?;
                    values.insert(String::from_utf8_lossy(lit).into_owned());
                    match self.peek() {
                        Tok::Comma => {}
                        Tok::ClosePar => break,
                        _ => return Err(Invalid),
                    }
                }
                (Tok::Comma, _) => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.peek() {
                        Tok::ClosePar => {
                            values.insert(String::new());
                            break;
                        }
                        Tok::Comma => {
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(Invalid),
            }
        }
        if self.next().0 == Tok::ClosePar {
            Ok(values.into_iter().collect())
        } else {
            Err(Invalid)
        }
    }
}

/// A value of a requirement, checked as upstream checks it, with its message.
fn valid_value(v: &[u8]) -> Result<(), Invalid> {
    if is_label_value(v) {
        Ok(())
    } else {
        Err(Invalid)
    }
}

/// apimachinery `validation.IsValidLabelValue`: at most 63 bytes, empty allowed.
pub(super) fn is_label_value(v: &[u8]) -> bool {
    std::str::from_utf8(v).is_ok_and(|v| names::label_value_problems(v).is_empty())
}

/// apimachinery `validation.IsQualifiedName`: `[DNS-1123 subdomain "/"] name`, the name
/// part at most 63 bytes.
pub(super) fn is_qualified_name(k: &[u8]) -> bool {
    std::str::from_utf8(k).is_ok_and(|k| names::qualified_name_problems(k).is_empty())
}
