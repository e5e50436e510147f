//! The bearer token of a webhook call: none, a fixed one, or a token file read again as
//! it ages (client-go's cached file token source).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::WebhookError;

/// How long a token read from a file is used before the file is read again: client-go's
/// `fileTokenSource` period (one minute) less `cachingTokenSource`'s leeway (ten
/// seconds), k8s.io/client-go `transport/token_source.go`.
const TOKEN_FILE_REREAD: Duration = Duration::from_secs(50);

/// Where the bearer token of a call comes from.
#[derive(Clone)]
pub(super) enum Token {
    None,
    Static(String),
    File(Arc<FileToken>),
}

/// A token file and the last token read from it, with when.
pub(super) struct FileToken {
    path: PathBuf,
    cached: Mutex<Option<(String, Instant)>>,
}

impl FileToken {
    pub(super) fn new(path: PathBuf, initial: Option<String>, now: Instant) -> FileToken {
        FileToken {
            path,
            cached: Mutex::new(initial.map(|t| (t, now))),
        }
    }
}

impl Token {
    /// The token to send now, if any.
    pub(super) fn current(&self, now: Instant) -> Result<Option<String>, WebhookError> {
        let file = match self {
            Token::None => return Ok(None),
            Token::Static(token) => return Ok(Some(token.clone())),
            Token::File(file) => file,
        };
        let mut cached = file
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((token, read)) = &*cached {
            if now.saturating_duration_since(*read) < TOKEN_FILE_REREAD {
                return Ok(Some(token.clone()));
            }
        }
        match std::fs::read_to_string(&file.path) {
            Ok(text) => {
                let token = text.trim().to_owned();
                *cached = Some((token.clone(), now));
                Ok(Some(token))
            }
            Err(e) => match &*cached {
                Some((token, _)) => {
                    tracing::warn!(file = %file.path.display(), error = %e, "cannot re-read the webhook's token file; the last token read is sent");
                    Ok(Some(token.clone()))
                }
                None => Err(WebhookError::Transport(format!(
                    "cannot read the token file {}: {e}",
                    file.path.display()
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_read_again_when_fifty_seconds_old_and_kept_when_it_cannot_be() {
        let dir =
            std::env::temp_dir().join(format!("kube-aggregator-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let start = Instant::now();
        let token = Token::File(Arc::new(FileToken::new(
            path.clone(),
            Some("first".into()),
            start,
        )));
        let at = |secs: u64| token.current(start + Duration::from_secs(secs)).unwrap();

        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(
            at(0).as_deref(),
            Some("first"),
            "the parsed token is used at first"
        );
        assert_eq!(
            at(49).as_deref(),
            Some("first"),
            "not read again before 50 s"
        );
        assert_eq!(at(50).as_deref(), Some("second"), "read again at 50 s");
        std::fs::write(&path, "third").unwrap();
        assert_eq!(at(99).as_deref(), Some("second"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            at(100).as_deref(),
            Some("second"),
            "the last token when the file is gone"
        );
        std::fs::write(&path, "fourth").unwrap();
        assert_eq!(
            at(101).as_deref(),
            Some("fourth"),
            "tried again on the next call"
        );

        let missing = Token::File(Arc::new(FileToken::new(dir.join("missing"), None, start)));
        let e = missing.current(start).unwrap_err().to_string();
        assert!(
            e.contains("cannot read the token file") && e.contains("missing"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
