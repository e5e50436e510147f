//! The request-header authenticator, the token file and bearer tokens.

use super::*;

/// The four header lists of a [`RequestHeaderConfig`], as configured (any case, maybe
/// padded or invalid).
#[derive(Debug, Clone, Default)]
pub struct HeaderLists {
    /// `--requestheader-username-headers`.
    pub username: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_prefixes: Vec<String>,
}

/// `lists` configures the request-header authenticator; `headers` are request headers
/// as raw name and value bytes (pairs that are not a valid header are dropped, repeated
/// names append). Checks that [`RequestHeaderConfig::user_from_headers`] and
/// [`RequestHeaderConfig::clear`] never panic and agree on whether the configuration is
/// valid; that a user always has a non-empty name, non-empty groups and a UID some
/// header carried; that `clear` removes exactly the headers named by the (trimmed,
/// case-insensitive) names and prefixes, keeping every other header with all its values;
/// and that no user can be read from the cleared headers.
pub fn fuzz_request_header(lists: &HeaderLists, headers: &[(Vec<u8>, Vec<u8>)]) {
    let config = RequestHeaderConfig {
        username_headers: lists.username.clone(),
        uid_headers: lists.uid.clone(),
        group_headers: lists.group.clone(),
        extra_header_prefixes: lists.extra_prefixes.clone(),
    };
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    let original = map.clone();

    let user = config.user_from_headers(&map);
    let mut cleared = map.clone();
    let clear = config.clear(&mut cleared);
    assert_eq!(user.is_ok(), clear.is_ok(), "{user:?} vs {clear:?}");
    let user = match user {
        Ok(user) => user,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert_eq!(
                cleared, original,
                "a rejected configuration changed the headers"
            );
            return;
        }
    };

    // What `clear` must match: names and prefixes trimmed, empty entries skipped, case
    // ignored (header names in a map are already lower case).
    let normalize = |raw: &[String]| -> Vec<String> {
        raw.iter()
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect()
    };
    let user_names = normalize(&lists.username);
    let uid_names = normalize(&lists.uid);
    let mut exact = user_names.clone();
    exact.extend(uid_names.iter().cloned());
    exact.extend(normalize(&lists.group));
    let prefixes = normalize(&lists.extra_prefixes);
    let doomed = |n: &HeaderName| {
        exact.iter().any(|e| e == n.as_str()) || prefixes.iter().any(|p| n.as_str().starts_with(p))
    };
    for name in cleared.keys() {
        assert!(!doomed(name), "{name} survived clear; config {lists:?}");
    }
    for name in original.keys() {
        if doomed(name) {
            continue;
        }
        let before: Vec<&HeaderValue> = original.get_all(name).iter().collect();
        let after: Vec<&HeaderValue> = cleared.get_all(name).iter().collect();
        assert_eq!(before, after, "clear touched the unrelated header {name}");
    }
    assert_eq!(
        config.user_from_headers(&cleared).ok().flatten(),
        None,
        "a user is still readable after clear"
    );

    let Some(user) = user else {
        return;
    };
    assert!(!user.name.is_empty(), "{user:?}");
    assert!(
        user_names.iter().any(|n| original.contains_key(n.as_str())),
        "a user without any username header: {user:?}"
    );
    assert!(user.groups.iter().all(|g| !g.is_empty()), "{user:?}");
    if !user.uid.is_empty() {
        assert!(
            uid_names.iter().any(|n| original
                .get_all(n.as_str())
                .iter()
                .any(|v| v.as_bytes() == user.uid.as_bytes())),
            "a UID no UID header carried: {user:?}"
        );
    }
}

/// `data` is the text of a `--token-auth-file`. Checks that
/// [`TokenFileAuthenticator::from_csv`] never panics; that it fails exactly when the CSV
/// is malformed or a record has fewer than 3 columns, with an error naming a line; and
/// that after a successful load every token `lookup` finds is the non-empty token of a
/// record, mapped to the last such record's user, uid and groups, while the empty token
/// and tokens of no record find nothing.
pub fn fuzz_token_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = TokenFileAuthenticator::from_csv(text);

    let mut records = Vec::new();
    let mut malformed = None;
    for record in crate::authn::parse_csv(text) {
        match record {
            Ok((line, fields)) if fields.len() >= 3 => records.push((line, fields)),
            Ok((line, _)) => {
                malformed = Some(line);
                break;
            }
            Err(e) => {
                malformed = e.line.or(Some(0));
                break;
            }
        }
    }
    let tokens = match (loaded, malformed) {
        (Err(e), Some(_)) => {
            assert!(e.line.is_some_and(|l| l >= 1), "{e:?}");
            assert!(e.to_string().contains(" line "), "{e}");
            return;
        }
        (Err(e), None) => panic!("well-formed file rejected: {e}"),
        (Ok(t), Some(line)) => panic!("malformed line {line} accepted ({} tokens)", t.len()),
        (Ok(t), None) => t,
    };

    assert!(tokens.lookup("").is_none(), "the empty token authenticates");
    // The last record of each non-empty token wins.
    let mut expected: HashMap<&str, &[String]> = HashMap::new();
    for (_, fields) in &records {
        if let Some(token) = fields.first().filter(|t| !t.is_empty()) {
            expected.insert(token, fields);
        }
    }
    assert_eq!(tokens.len(), expected.len());
    for (token, fields) in &expected {
        let user = tokens.lookup(token);
        let Some(user) = user else {
            panic!("token of a record not found");
        };
        assert_eq!(Some(&user.name), fields.get(1));
        assert_eq!(Some(&user.uid), fields.get(2));
        let groups: Vec<String> = fields
            .get(3)
            .map(|g| g.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        assert_eq!(user.groups, groups);
    }
    // Any other string of the file is not a token unless some record says so.
    for (_, fields) in &records {
        for probe in fields.iter().skip(1) {
            if tokens.lookup(probe).is_some() {
                assert!(
                    expected.contains_key(probe.as_str()),
                    "a lookup found a string that is no record's token"
                );
            }
        }
    }
}

/// `authorization` is an `Authorization` header value. Checks that [`bearer_token`]
/// never panics and finds a token exactly when the trimmed value is `bearer` (any case),
/// one space and a non-empty run of non-space characters, optionally followed by a space
/// and anything; the token is that run, so it is non-empty, has no space and is a
/// substring of the value.
pub fn fuzz_bearer(authorization: &str) {
    let token = bearer_token(authorization);
    let trimmed = authorization.trim();
    let expected = trimmed
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case("bearer "))
        .and_then(|_| trimmed.get(7..))
        .and_then(|rest| rest.split(' ').next())
        .filter(|t| !t.is_empty());
    assert_eq!(token, expected, "{authorization:?}");
    if let Some(token) = token {
        assert!(!token.is_empty());
        assert!(!token.contains(' '), "{token:?}");
        assert!(authorization.contains(token), "{token:?}");
    }
}
