//! The front-proxy authenticator against the rows of apiserver's `requestheader_test.go`:
//! user, UID, group and extra headers (escaped extra keys decoded), which headers are
//! stripped for a custom configuration, and invalid configured header names.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::*;

fn cfg(user: &[&str], uid: &[&str], group: &[&str], extra: &[&str]) -> RequestHeaderConfig {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    RequestHeaderConfig {
        username_headers: v(user),
        uid_headers: v(uid),
        group_headers: v(group),
        extra_header_prefixes: v(extra),
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

fn user(name: &str, uid: &str, groups: &[&str], extra: &[(&str, &[&str])]) -> UserInfo {
    UserInfo {
        name: name.into(),
        uid: uid.into(),
        groups: groups.iter().map(|s| s.to_string()).collect(),
        extra: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect::<BTreeMap<_, _>>(),
    }
}

/// Runs one row: the parsed user, and the headers left after clearing on success.
fn row(c: &RequestHeaderConfig, h: &HeaderMap) -> (Option<UserInfo>, HeaderMap) {
    let u = c.user_from_headers(h).unwrap();
    let mut left = h.clone();
    if u.is_some() {
        c.clear(&mut left).unwrap();
    }
    (u, left)
}

const UID1: &str = "8f5ea9d1-a5ed-4d02-80a2-26709216350b";
const UID2: &str = "c7644180-c774-4a9b-81e5-3eef76f087ab";
const UIDX: &str = "2ca80fb0-60ea-4ecf-951c-89af843b0402";

#[test]
fn vectors_2_1_user_rows() {
    assert_eq!(row(&cfg(&[], &[], &[], &[]), &HeaderMap::new()).0, None);
    let std = cfg(&["X-Remote-User"], &[], &[], &[]);
    assert_eq!(row(&std, &HeaderMap::new()).0, None);
    let (u, left) = row(&std, &headers(&[("X-Remote-User", "Bob")]));
    assert_eq!(u, Some(user("Bob", "", &[], &[])));
    assert!(left.is_empty());
    let exact = headers(&[
        ("Prefixed-X-Remote-User-With-Suffix", "Bob"),
        ("X-Remote-User-With-Suffix", "Bob"),
    ]);
    assert_eq!(row(&std, &exact).0, None);
    let first = cfg(
        &[
            "X-Remote-User",
            "A-Second-X-Remote-User",
            "Another-X-Remote-User",
        ],
        &[],
        &[],
        &[],
    );
    let h = headers(&[
        ("X-Remote-User", ""),
        ("X-Remote-User", "First header, second value"),
        ("A-Second-X-Remote-User", "Second header, first value"),
        ("A-Second-X-Remote-User", "Second header, second value"),
        ("Another-X-Remote-User", "Third header, first value"),
    ]);
    let (u, left) = row(&first, &h);
    assert_eq!(u, Some(user("Second header, first value", "", &[], &[])));
    assert!(left.is_empty());
    let ci = cfg(&["x-REMOTE-user"], &[], &[], &[]);
    let (u, left) = row(&ci, &headers(&[("X-Remote-User", "Bob")]));
    assert_eq!(u, Some(user("Bob", "", &[], &[])));
    assert!(left.is_empty());
}

#[test]
fn vectors_2_1_group_and_uid_rows() {
    let g = cfg(&["X-Remote-User"], &[], &["X-Remote-Group"], &[]);
    assert_eq!(
        row(&g, &headers(&[("X-Remote-User", "Bob")])).0,
        Some(user("Bob", "", &[], &[]))
    );
    let g2 = cfg(
        &["X-Remote-User"],
        &[],
        &["X-Remote-Group-1", "X-Remote-Group-2"],
        &[],
    );
    let h = headers(&[
        ("X-Remote-User", "Bob"),
        ("X-Remote-Group-1", "one-a"),
        ("X-Remote-Group-1", "one-b"),
        ("X-Remote-Group-2", "two-a"),
        ("X-Remote-Group-2", "two-b"),
    ]);
    let (u, left) = row(&g2, &h);
    assert_eq!(
        u,
        Some(user("Bob", "", &["one-a", "one-b", "two-a", "two-b"], &[]))
    );
    assert!(left.is_empty());
    let gci = cfg(&["X-REMOTE-User"], &[], &["X-REMOTE-Group"], &[]);
    let (u, left) = row(
        &gci,
        &headers(&[("X-Remote-User", "Bob"), ("X-Remote-Group", "Users")]),
    );
    assert_eq!(u, Some(user("Bob", "", &["Users"], &[])));
    assert!(left.is_empty());
    // Groups are never split on commas.
    let (u, _) = row(
        &gci,
        &headers(&[("X-Remote-User", "Bob"), ("X-Remote-Group", "a,b")]),
    );
    assert_eq!(u.unwrap().groups, ["a,b"]);

    let uid = cfg(&["X-Remote-User"], &["X-Remote-Uid"], &[], &[]);
    assert_eq!(
        row(&uid, &headers(&[("X-Remote-User", "Bob")])).0,
        Some(user("Bob", "", &[], &[]))
    );
    let h = headers(&[
        ("X-Remote-User", "Bob"),
        ("X-Remote-Uid-1", UID1),
        ("X-Remote-Uid-2", UID2),
    ]);
    let (u, left) = row(&uid, &h);
    assert_eq!(u, Some(user("Bob", "", &[], &[])));
    assert_eq!(left.len(), 2, "unrelated uid headers are kept");
    let uid2 = cfg(
        &["X-Remote-User"],
        &["X-Remote-Uid-1", "X-Remote-Uid-2"],
        &[],
        &[],
    );
    let (u, left) = row(&uid2, &h);
    assert_eq!(u, Some(user("Bob", UID1, &[], &[])));
    assert!(left.is_empty());
}

fn extra_request(with_uid: bool, unrelated: bool) -> HeaderMap {
    let mut pairs = vec![
        ("X-Remote-User", "Bob"),
        ("X-Remote-Group-1", "one-a"),
        ("X-Remote-Group-1", "one-b"),
        ("X-Remote-Group-2", "two-a"),
        ("X-Remote-Group-2", "two-b"),
        ("X-Remote-extra-1-key1", "alfa"),
        ("X-Remote-extra-1-key1", "bravo"),
        ("X-Remote-Extra-1-Key2", "charlie"),
        ("X-Remote-Extra-1-Key2", "delta"),
        ("X-Remote-Extra-1-", "india"),
        ("X-Remote-Extra-1-", "juliet"),
        ("X-Remote-extra-2-", "kilo"),
        ("X-Remote-extra-2-", "lima"),
        ("X-Remote-extra-2-Key1", "echo"),
        ("X-Remote-extra-2-Key1", "foxtrot"),
        ("X-Remote-Extra-2-key2", "golf"),
        ("X-Remote-Extra-2-key2", "hotel"),
    ];
    if with_uid {
        pairs.push(("X-Remote-Uid", UIDX));
    }
    if unrelated {
        pairs.push(("X-Group-Remote", "snorlax"));
        pairs.push(("X-Group-Bear", "panda"));
    }
    headers(&pairs)
}

#[test]
fn vectors_2_1_extra_rows() {
    let extra: &[(&str, &[&str])] = &[
        ("key1", &["alfa", "bravo", "echo", "foxtrot"]),
        ("key2", &["charlie", "delta", "golf", "hotel"]),
        ("", &["india", "juliet", "kilo", "lima"]),
    ];
    let groups = ["one-a", "one-b", "two-a", "two-b"];
    let c = cfg(
        &["X-Remote-User"],
        &["X-Remote-UID"],
        &["X-Remote-Group-1", "X-Remote-Group-2"],
        &["X-Remote-Extra-1-", "X-Remote-Extra-2-"],
    );
    let (u, left) = row(&c, &extra_request(true, false));
    assert_eq!(u, Some(user("Bob", UIDX, &groups, extra)));
    assert!(left.is_empty());
    let c = cfg(
        &["X-Remote-User"],
        &[],
        &["X-Remote-Group-1", "X-Remote-Group-2"],
        &["X-Remote-Extra-1-", "X-Remote-Extra-2-"],
    );
    let (u, left) = row(&c, &extra_request(false, true));
    assert_eq!(u, Some(user("Bob", "", &groups, extra)));
    assert_eq!(
        left,
        headers(&[("X-Group-Remote", "snorlax"), ("X-Group-Bear", "panda")])
    );
}

#[test]
fn vectors_2_1_escaped_extra_keys() {
    // Upstream's row also has a backslash, which Go accepts in header names but RFC 7230
    // (and so `http::HeaderName`) does not; the 13 token characters remain.
    let legal = "X-Remote-Extra-Abc123!#$+.-_*^`~|'";
    let h = headers(&[
        ("X-Remote-User", "Bob"),
        ("X-Remote-Uid", UIDX),
        ("X-Remote-Group", "one-a"),
        ("X-Remote-Group", "one-b"),
        ("X-Remote-Extra-Alpha", "alphabetical"),
        ("X-Remote-Extra-Alph4num3r1c", "alphanumeric"),
        ("X-Remote-Extra-Percent%20encoded", "percent encoded"),
        (
            "X-Remote-Extra-Almost%zzpercent%xxencoded",
            "not quite percent encoded",
        ),
        (
            "X-Remote-Extra-Example.com%2fpercent%2520encoded",
            "url with double percent encoding",
        ),
        (
            "X-Remote-Extra-Example.com%2F%E4%BB%8A%E6%97%A5%E3%81%AF",
            "url with unicode",
        ),
        (legal, "header key legal characters"),
    ]);
    let c = cfg(
        &["X-Remote-User"],
        &["X-Remote-Uid"],
        &["X-Remote-Group"],
        &["X-Remote-Extra-"],
    );
    let (u, left) = row(&c, &h);
    let u = u.unwrap();
    assert_eq!((u.name.as_str(), u.uid.as_str()), ("Bob", UIDX));
    assert_eq!(u.groups, ["one-a", "one-b"]);
    let keys: Vec<&str> = u.extra.keys().map(String::as_str).collect();
    let mut want = vec![
        "alpha",
        "alph4num3r1c",
        "percent encoded",
        "almost%zzpercent%xxencoded",
        "example.com/percent%20encoded",
        "example.com/今日は",
        "abc123!#$+.-_*^`~|'",
    ];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(u.extra["example.com/今日は"], ["url with unicode"]);
    assert!(left.is_empty());
}

#[test]
fn vectors_2_2_custom_config_strips_only_its_names_plus_standard() {
    use crate::identity::strip as strip_identity_headers;
    let run = |c: &RequestHeaderConfig, h: &[(&str, &str)]| {
        let mut h = headers(h);
        strip_identity_headers(&mut h);
        c.clear(&mut h).unwrap();
        let mut names: Vec<String> = h.keys().map(|k| k.to_string()).collect();
        names.sort();
        names
    };
    let extras = [
        ("X-Remote-Extra-1-Key1", "a"),
        ("X-Remote-Extra-1-Key2", "b"),
        ("X-Remote-Extra-1-", "c"),
        ("X-Remote-Extra-2-", "d"),
        ("X-Remote-Extra-2-Key1", "e"),
        ("X-Remote-Extra-2-Key2", "f"),
    ];
    let mut h = vec![
        ("X-Remote-User", "Bob"),
        ("X-Remote-Uid", "x"),
        ("X-Remote-Group-1", "g"),
        ("X-Remote-Group-2", "g"),
    ];
    h.extend(extras);
    assert_eq!(
        run(&cfg(&["foo"], &["footoo"], &["bar"], &["baz"]), &h),
        ["x-remote-group-1", "x-remote-group-2"]
    );
    let mut h = vec![
        ("X-Remote-User", "Bob"),
        ("X-Remote-Uid", "x"),
        ("X-Remote-Group-3", "g"),
        ("X-Remote-Group-4", "g"),
        ("One", "u"),
        ("Two", "g"),
        ("Three-Four", "e"),
    ];
    h.extend(extras);
    assert_eq!(
        run(&cfg(&["one"], &["onetoo"], &["two"], &["three-"]), &h),
        ["x-remote-group-3", "x-remote-group-4"]
    );
    let h = [
        ("X-Remote-User", "Bob"),
        ("X-Remote-Uid-1", "one"),
        ("X-Remote-Uid-2", "two"),
        ("X-Remote-Uid-2", "three"),
        ("X-Group-Remote", "snorlax"),
        ("X-Uid-Remote", "bobs-unrelated-uid"),
    ];
    assert_eq!(
        run(
            &cfg(
                &["X-Remote-USER"],
                &["X-REMOTE-UID-1", "X-Remote-Uid-2"],
                &[],
                &[]
            ),
            &h
        ),
        ["x-group-remote", "x-uid-remote"]
    );
}

#[test]
fn invalid_header_name_is_named() {
    let err = cfg(&["bad header"], &[], &[], &[])
        .user_from_headers(&HeaderMap::new())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "username headers: \"bad header\" is not a valid header name"
    );
}
