//! Label and field selectors as apimachinery parses them (`pkg/labels/selector.go`,
//! `pkg/fields/selector.go`), for the sample extension servers.
//!
//! Label selectors: requirements joined by `,`; `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
//! `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`. `!=` and `notin` also match objects without the
//! label, as upstream. Field selectors: `f=v`, `f==v`, `f!=v` terms joined by `,`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `k=v`, `k==v`, `k in (..)`.
    In(String, Vec<String>),
    /// `k!=v`, `k notin (..)`.
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    DoesNotExist(String),
    /// `k>n`.
    Gt(String, i64),
    /// `k<n`.
    Lt(String, i64),
}

/// A parsed label selector; empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    /// Parses `s`; the error is upstream's `unable to parse requirement: ...` wording.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut out = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            out.push(parse_requirement(term)?);
        }
        Ok(LabelSelector(out))
    }

    /// True when every requirement holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    /// True for the empty selector.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `metav1.LabelSelector` form (`metav1.ParseToLabelSelector`): equality terms in
    /// `matchLabels`, the others in `matchExpressions`; `null` for an empty selector.
    pub fn to_label_selector(&self) -> Value {
        if self.0.is_empty() {
            return Value::Null;
        }
        let mut match_labels = serde_json::Map::new();
        let mut expressions = Vec::new();
        for r in &self.0 {
            let expr = |key: &str, op: &str, values: &[String]| {
                let mut e = json!({"key": key, "operator": op});
                if !values.is_empty() {
                    e["values"] = json!(values);
                }
                e
            };
            match r {
                Requirement::In(k, vs) if vs.len() == 1 => {
                    match_labels.insert(k.clone(), vs[0].clone().into());
                }
                Requirement::In(k, vs) => expressions.push(expr(k, "In", vs)),
                Requirement::NotIn(k, vs) => expressions.push(expr(k, "NotIn", vs)),
                Requirement::Exists(k) => expressions.push(expr(k, "Exists", &[])),
                Requirement::DoesNotExist(k) => expressions.push(expr(k, "DoesNotExist", &[])),
                Requirement::Gt(k, n) => expressions.push(expr(k, "Gt", &[n.to_string()])),
                Requirement::Lt(k, n) => expressions.push(expr(k, "Lt", &[n.to_string()])),
            }
        }
        let mut out = serde_json::Map::new();
        if !match_labels.is_empty() {
            out.insert("matchLabels".into(), Value::Object(match_labels));
        }
        if !expressions.is_empty() {
            out.insert("matchExpressions".into(), Value::Array(expressions));
        }
        Value::Object(out)
    }
}

/// Splits on the commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    let fail = |what: &str| Err(format!("unable to parse requirement: {what}"));
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok(Requirement::DoesNotExist(key.to_owned()));
    }
    for (op, neg) in [(" notin ", true), (" in ", false)] {
        if let Some((key, rest)) = term.split_once(op) {
            let key = key.trim();
            check_key(key)?;
            let rest = rest.trim();
            let Some(inner) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
                return fail(&format!("found '{rest}', expected: '('"));
            };
            let values: Vec<String> = inner
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect();
            for v in &values {
                check_value(v)?;
            }
            return Ok(if neg {
                Requirement::NotIn(key.to_owned(), values)
            } else {
                Requirement::In(key.to_owned(), values)
            });
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((key, value)) = term.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            check_key(key)?;
            return match kind {
                0 | 1 => {
                    check_value(value)?;
                    let values = vec![value.to_owned()];
                    Ok(if kind == 0 {
                        Requirement::NotIn(key.to_owned(), values)
                    } else {
                        Requirement::In(key.to_owned(), values)
                    })
                }
                _ => match value.parse::<i64>() {
                    Ok(n) if kind == 2 => Ok(Requirement::Gt(key.to_owned(), n)),
                    Ok(n) => Ok(Requirement::Lt(key.to_owned(), n)),
                    Err(_) => fail(&format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer: {value}"
                    )),
                },
            };
        }
    }
    check_key(term)?;
    Ok(Requirement::Exists(term.to_owned()))
}

/// A qualified name: an optional DNS-subdomain prefix and `/`, then at most 63 characters
/// of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn check_key(key: &str) -> Result<(), String> {
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    if is_label_value(name) && !name.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn check_value(value: &str) -> Result<(), String> {
    if is_label_value(value) {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

/// Empty, or at most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    v.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// One field selector term: `field`, expected value, `true` for `=`/`==`, `false` for `!=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equal: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldTerm>);

impl FieldSelector {
    /// Parses `s`; the error is upstream's `invalid selector: ...` wording.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let parsed = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            terms.push(FieldTerm {
                field: parsed.0.trim().to_owned(),
                value: parsed.1.trim().to_owned(),
                equal: parsed.2,
            });
        }
        Ok(FieldSelector(terms))
    }

    /// The value an `=` term requires of `field`, if any (`RequiresExactMatch`).
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|t| t.field == field && t.equal)
            .map(|t| t.value.as_str())
    }

    /// True when every term holds; `get` reads a field's value.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|t| {
            let actual = get(&t.field).unwrap_or_default();
            (actual == t.value) == t.equal
        })
    }
}
