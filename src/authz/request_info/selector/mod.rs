//! Field and label selectors: validity as `ListOptions` decoding needs it, and the
//! requirements authorization sends (apimachinery
//! [`pkg/fields/selector.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/fields/selector.go)
//! and [`pkg/labels/selector.go`](https://github.com/kubernetes/apimachinery/blob/master/pkg/labels/selector.go)).

mod label;

use std::borrow::Cow;

/// The selector does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid;

/// apimachinery `fields.ParseSelector(sel)` followed by `RequiresExactMatch(field)`.
///
/// Terms are split on unescaped commas; each term splits at its first `!=`, `==` or
/// `=`; the value is unescaped (`\\`, `\,`, `\=`; a bare `,` or `=` or any other
/// escape is an error). Upstream sorts the raw terms and reports the first equality
/// term on `field`, so the smallest such raw term wins here too.
pub(super) fn field_exact_match<'s>(
    sel: &'s str,
    field: &str,
) -> Result<Option<Cow<'s, str>>, Invalid> {
    let mut best: Option<(&str, Cow<'s, str>)> = None;
    for term in split_terms(sel) {
        if term.is_empty() {
            continue;
        }
        let (lhs, equality, rhs) = split_term(term).ok_or(Invalid)?;
        let value = unescape_field_value(rhs)?;
        if equality && lhs == field && best.as_ref().is_none_or(|(t, _)| term < *t) {
            best = Some((term, value));
        }
    }
    Ok(best.map(|(_, v)| v))
}

fn split_terms(sel: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut in_slash = false;
    let mut done = false;
    let bytes = sel.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            i += 1;
            if in_slash {
                in_slash = false;
            } else if b == b'\\' {
                in_slash = true;
            } else if b == b',' {
                let term = sel.get(start..i - 1);
                start = i;
                return term;
            }
        }
        if done {
            return None;
        }
        done = true;
        sel.get(start..)
    })
}

/// `(lhs, is_equality, rhs)` split at the first operator; `None` without one.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    let bytes = term.as_bytes();
    let (at, len, equality) = bytes.iter().enumerate().find_map(|(i, &b)| {
        let next = bytes.get(i + 1).copied();
        match (b, next) {
            (b'!', Some(b'=')) => Some((i, 2, false)),
            (b'=', Some(b'=')) => Some((i, 2, true)),
            (b'=', _) => Some((i, 1, true)),
            _ => None,
        }
    })?;
    Some((term.get(..at)?, equality, term.get(at + len..)?))
}

fn unescape_field_value(v: &str) -> Result<Cow<'_, str>, Invalid> {
    if !v.contains(['\\', ',', '=']) {
        return Ok(Cow::Borrowed(v));
    }
    let mut out = String::with_capacity(v.len());
    let mut in_slash = false;
    for c in v.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(Invalid);
            }
            out.push(c);
            in_slash = false;
        } else {
            match c {
                '\\' => in_slash = true,
                ',' | '=' => return Err(Invalid),
                _ => out.push(c),
            }
        }
    }
    if in_slash {
        return Err(Invalid);
    }
    Ok(Cow::Owned(out))
}

/// Whether apimachinery `labels.Parse(sel)` succeeds.
///
/// Grammar: comma-separated requirements `[!]KEY`, `KEY (=|==|!=|>|<) VALUE` or
/// `KEY (in|notin) (VALUE, ...)`; keys must be qualified names, values label
/// values, and `>`/`<` take one base-10 integer. The lexer is kept byte-for-byte,
/// including its quirk of treating a NUL byte as end of input where a token could
/// start.
pub(super) fn label_selector_is_valid(sel: &str) -> bool {
    parse_label_selector(sel).is_ok()
}

/// apimachinery `labels.Parse(sel)`'s requirements: in key order (a stable sort,
/// which is what Go's sort gives for the dozen requirements a selector has).
pub(crate) fn parse_label_selector(sel: &str) -> Result<Vec<LabelRequirement>, Invalid> {
    let mut reqs = label::requirements(sel)?;
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(reqs)
}

/// apimachinery `labels.NewRequirement`'s checks for a requirement given as parts
/// (`metav1.LabelSelectorRequirement` with an operator already mapped): a qualified
/// key; at least one value for `In`/`NotIn`, none for `Exists`/`DoesNotExist`; every
/// value a label value.
pub(crate) fn valid_label_requirement(
    key: &str,
    operator: LabelOperator,
    values: &[String],
) -> bool {
    let count_ok = match operator {
        LabelOperator::In | LabelOperator::NotIn => !values.is_empty(),
        LabelOperator::Exists | LabelOperator::DoesNotExist => values.is_empty(),
        LabelOperator::Equals | LabelOperator::NotEquals => values.len() == 1,
        LabelOperator::GreaterThan | LabelOperator::LessThan => {
            values.len() == 1 && values[0].parse::<i64>().is_ok()
        }
    };
    count_ok
        && label::is_qualified_name(key.as_bytes())
        && values.iter().all(|v| label::is_label_value(v.as_bytes()))
}

/// An operator of a label selector requirement (apimachinery `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LabelOperator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One parsed label selector requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LabelRequirement {
    pub(crate) key: String,
    pub(crate) operator: LabelOperator,
    pub(crate) values: Vec<String>,
}

impl LabelRequirement {
    /// Whether an object with `labels` meets this requirement, as apimachinery's
    /// `Requirement.Matches`: `=`, `==`, `in` need the label with one of the values;
    /// `!=`, `notin` are met by a missing label too; `>` and `<` need the label with a
    /// base-10 integer value beyond the requirement's.
    pub(crate) fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let listed = || value.is_some_and(|v| self.values.contains(v));
        match self.operator {
            LabelOperator::Equals | LabelOperator::In => listed(),
            LabelOperator::NotEquals | LabelOperator::NotIn => !listed(),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let (Some(Ok(have)), Some(Ok(bound))) = (
                    value.map(|v| v.parse::<i64>()),
                    self.values.first().map(|v| v.parse::<i64>()),
                ) else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }
}

/// A field selector that `fields.ParseSelector` refuses, with its error text: a term
/// with no operator gives `invalid selector: '<selector>'; can't understand '<term>'`
/// (apimachinery `pkg/fields/selector.go` `parseSelector`); a value with a bad escape
/// or an unescaped `,` or `=` gives `invalid field selector: ...`.
pub(crate) fn field_selector_error(sel: &str) -> Option<String> {
    let mut terms: Vec<&str> = split_terms(sel).collect();
    terms.sort_unstable();
    for term in terms.into_iter().filter(|t| !t.is_empty()) {
        let Some((_, _, rhs)) = split_term(term) else {
            return Some(format!(
                "invalid selector: '{sel}'; can't understand '{term}'"
            ));
        };
        if unescape_field_value(rhs).is_err() {
            return Some(format!(
                "invalid field selector: invalid escape sequence or unescaped character in value {rhs:?}"
            ));
        }
    }
    None
}

/// One parsed field selector term: `field` equals (or, `equal == false`, does not
/// equal) `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldRequirement {
    pub(crate) field: String,
    pub(crate) equal: bool,
    pub(crate) value: String,
}

impl FieldRequirement {
    /// Whether a field whose value is `value` (empty when the object has no such field,
    /// as apimachinery's `fields.Set.Get`) meets this term.
    pub(crate) fn matches(&self, value: &str) -> bool {
        (self.value == value) == self.equal
    }
}

/// apimachinery `fields.ParseSelector(sel).Requirements()`: terms sorted by their
/// raw text, each split at its first operator, values unescaped.
pub(crate) fn parse_field_selector(sel: &str) -> Result<Vec<FieldRequirement>, Invalid> {
    // No selector (most requests): no requirements, and nothing allocated for them.
    if sel.is_empty() {
        return Ok(Vec::new());
    }
    let mut terms: Vec<&str> = split_terms(sel).collect();
    terms.sort_unstable();
    let mut out = Vec::with_capacity(terms.len());
    for term in terms {
        if term.is_empty() {
            continue;
        }
        let (lhs, equal, rhs) = split_term(term).ok_or(Invalid)?;
        out.push(FieldRequirement {
            field: lhs.to_owned(),
            equal,
            value: unescape_field_value(rhs)?.into_owned(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selector_parsing() {
        let name = |s| field_exact_match(s, "metadata.name");
        assert_eq!(name(""), Ok(None));
        assert_eq!(name(","), Ok(None));
        assert_eq!(name("metadata.name=foo").unwrap().as_deref(), Some("foo"));
        assert_eq!(name("metadata.name==foo").unwrap().as_deref(), Some("foo"));
        assert_eq!(name("metadata.name!=foo"), Ok(None));
        assert_eq!(name("metadata.name="), Ok(Some(Cow::Borrowed(""))));
        assert_eq!(name(" metadata.name=foo"), Ok(None));
        assert_eq!(name("foo=bar"), Ok(None));
        // Upstream sorts the raw terms; the first equality on the field wins.
        let n = name("metadata.name=b,x=y,metadata.name=a").unwrap();
        assert_eq!(n.as_deref(), Some("a"));
        assert_eq!(name("metadata.name=a\\,b").unwrap().as_deref(), Some("a,b"));
        assert_eq!(
            name("metadata.name=a\\=b\\\\").unwrap().as_deref(),
            Some("a=b\\")
        );
        assert_eq!(name("metadata.name=name1,foo"), Err(Invalid));
        assert_eq!(name("metadata.name=a=b"), Err(Invalid));
        assert_eq!(name("metadata.name===b"), Err(Invalid));
        assert_eq!(name("metadata.name=a\\x"), Err(Invalid));
        assert_eq!(name("metadata.name=a\\"), Err(Invalid));
        assert_eq!(name("metadata.name=a\\é"), Err(Invalid));
        assert_eq!(name("novalue"), Err(Invalid));
        assert_eq!(name("a!b=c").unwrap(), None);
    }

    #[test]
    fn label_selector_parsing() {
        for ok in [
            "",
            " ",
            "x",
            "x=a",
            "x==a",
            "x!=a",
            "x=",
            "x=a,y!=b",
            "!x",
            "x,!y,z",
            "x in (a,b)",
            "x notin ()",
            "x in (,)",
            "x in (foo,,baz),y,z notin ()",
            "x>1",
            "x<10",
            "x > 1",
            "in in (in)",
            "notin=notin",
            "example.com/app=web",
            "a.b-c_d=E.f-g_h",
            "x=a \0junk",
            // Scanning the comma consumes the NUL after it, so `y` is still read.
            "x=a,\0y",
            "x==",
        ] {
            assert!(label_selector_is_valid(ok), "{ok:?} should parse");
        }
        for bad in [
            ",",
            "x,",
            "x=a,",
            "=a",
            "x in",
            "x in (",
            "x in (a",
            "x in (a b)",
            "x=a b",
            "x>a",
            "x>-1",
            "x>",
            "x in a",
            "!x=a",
            "!",
            "x=(",
            "-x",
            "x-",
            "a/b/c",
            "/x",
            "Example.com/x",
            "x=-a",
            "x=é",
            "x=a\0b",
            "x=a, \0y",
            &format!("x={}", "a".repeat(64)),
            &format!("{}=a", "k".repeat(64)),
        ] {
            assert!(!label_selector_is_valid(bad), "{bad:?} should not parse");
        }
        assert!(label_selector_is_valid(&format!("x={}", "a".repeat(63))));
    }
}
