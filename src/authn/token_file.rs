//! The static token file of `--token-auth-file` (k8s.io/apiserver
//! [`pkg/authentication/token/tokenfile/tokenfile.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/token/tokenfile/tokenfile.go)):
//! CSV lines `token,user,uid[,"group1,group2"]`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{AuthenticateFuture, TokenAuthenticator, UserInfo};

/// A token file that cannot be loaded; names the file (when read from one), the line and
/// what is wrong: `token file /etc/tokens.csv line 3: must have at least 3 columns ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token file{}{}: {detail}", file.as_ref().map(|f| format!(" {}", f.display())).unwrap_or_default(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct TokenFileError {
    /// The file, when read from one.
    pub file: Option<PathBuf>,
    /// The 1-based line the bad record starts on, when the problem is a record.
    pub line: Option<usize>,
    /// What is wrong.
    pub detail: String,
}

/// Tokens from a CSV file: `token,user,uid[,"group1,group2"[,ignored...]]`.
///
/// Each record needs at least 3 columns, or the whole file fails to load. A record with an
/// empty token is skipped; of duplicate tokens the last wins (both with a warning). The
/// fourth column is split on `,` (quote it in CSV). Lookup is an exact match; an unknown
/// token is not ok without an error.
///
/// ```
/// use kube_aggregator::authn::TokenFileAuthenticator;
///
/// let tokens = TokenFileAuthenticator::from_csv("s3cret,alice,uid-1,\"dev,ops\"\n").unwrap();
/// let alice = tokens.lookup("s3cret").unwrap();
/// assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "uid-1"));
/// assert_eq!(alice.groups, ["dev", "ops"]);
/// assert!(tokens.lookup("guess").is_none());
///
/// let err = TokenFileAuthenticator::from_csv("only,two\n").unwrap_err();
/// assert!(err.to_string().contains("line 1"), "{err}");
/// ```
#[derive(Clone, Default)]
pub struct TokenFileAuthenticator {
    tokens: Arc<HashMap<String, UserInfo>>,
}

// Never print the tokens.
debug_fields!(TokenFileAuthenticator { tokens.len() });

impl TokenFileAuthenticator {
    /// Loads `path`, read once (a changed file needs a new authenticator, as upstream
    /// reads `--token-auth-file` at start-up).
    ///
    /// # Errors
    ///
    /// A [`TokenFileError`] naming the file: it cannot be read, or a record has fewer than
    /// 3 columns or does not parse as CSV.
    pub fn from_file(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|e| TokenFileError {
            file: Some(path.to_owned()),
            line: None,
            detail: format!("cannot read: {e}"),
        })?;
        Self::from_csv(&text).map_err(|mut e| {
            e.file = Some(path.to_owned());
            e
        })
    }

    /// Parses CSV text.
    ///
    /// # Errors
    ///
    /// A [`TokenFileError`] naming the line of the first bad record.
    pub fn from_csv(text: &str) -> Result<Self, TokenFileError> {
        let mut tokens = HashMap::new();
        for record in parse_csv(text) {
            let (line, fields) = record?;
            if fields.len() < 3 {
                return Err(TokenFileError {
                    file: None,
                    line: Some(line),
                    detail: format!(
                        "must have at least 3 columns (token, user name, user uid), found {}",
                        fields.len()
                    ),
                });
            }
            let mut fields = fields.into_iter();
            let (token, name, uid) = match (fields.next(), fields.next(), fields.next()) {
                (Some(t), Some(n), Some(u)) => (t, n, u),
                _ => continue,
            };
            if token.is_empty() {
                tracing::warn!(line, "token file: skipping a record with an empty token");
                continue;
            }
            let groups = fields
                .next()
                .map(|g| g.split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            let user = UserInfo {
                name,
                uid,
                groups,
                ..UserInfo::default()
            };
            if tokens.insert(token, user).is_some() {
                tracing::warn!(line, "token file: duplicate token; the last one wins");
            }
        }
        Ok(TokenFileAuthenticator {
            tokens: Arc::new(tokens),
        })
    }

    /// How many tokens were loaded.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when no token was loaded.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The user of `token`, if any (with the groups of its line; `system:authenticated` is
    /// added later, by the layer).
    pub fn lookup(&self, token: &str) -> Option<&UserInfo> {
        self.tokens.get(token)
    }
}

impl TokenAuthenticator for TokenFileAuthenticator {
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> AuthenticateFuture {
        Box::pin(std::future::ready(Ok(self.lookup(token).cloned())))
    }
}

/// Records of `text` as Go's `encoding/csv` reads them with a variable field count:
/// `,`-separated, `"`-quoted fields with `""` for a quote and newlines allowed inside,
/// `\r\n` as `\n`, empty lines skipped. Each record comes with the line it starts on.
pub(crate) fn parse_csv(
    text: &str,
) -> impl Iterator<Item = Result<(usize, Vec<String>), TokenFileError>> + '_ {
    let mut chars = text.chars().filter(|c| *c != '\r').peekable();
    let mut line = 1;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        while chars.peek() == Some(&'\n') {
            chars.next();
            line += 1;
        }
        chars.peek()?;
        let start = line;
        let err = |line: usize, detail: &str| TokenFileError {
            file: None,
            line: Some(line),
            detail: detail.to_owned(),
        };
        let mut fields = Vec::new();
        loop {
            let mut field = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            field.push(c);
                        }
                        None => {
                            failed = true;
                            return Some(Err(err(
                                start,
                                "extraneous or missing \" in quoted-field",
                            )));
                        }
                    }
                }
                if !matches!(chars.peek(), None | Some(',') | Some('\n')) {
                    failed = true;
                    return Some(Err(err(line, "extraneous or missing \" in quoted-field")));
                }
            } else {
                while let Some(c) = chars.peek().copied() {
                    if c == ',' || c == '\n' {
                        break;
                    }
                    if c == '"' {
                        failed = true;
                        return Some(Err(err(line, "bare \" in non-quoted-field")));
                    }
                    field.push(c);
                    chars.next();
                }
            }
            fields.push(field);
            match chars.next() {
                Some(',') => continue,
                Some(_) => {
                    line += 1;
                    break;
                }
                None => break,
            }
        }
        Some(Ok((start, fields)))
    })
}

#[cfg(test)]
#[path = "token_file_tests.rs"]
mod tests;
