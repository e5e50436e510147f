//! The rows of upstream's `TestImpersonationFilter`, in its order.

use super::*;

pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) user: UserInfo,
    pub(super) impersonate_user: &'static str,
    pub(super) groups: &'static [&'static str],
    pub(super) extras: &'static [(&'static str, &'static [&'static str])],
    pub(super) uid: &'static str,
    /// `None`: the handler is not reached.
    pub(super) expected: Option<UserInfo>,
    pub(super) code: StatusCode,
}

fn expect(name: &str, groups: &[&str], uid: &str, extra: &[(&str, &[&str])]) -> Option<UserInfo> {
    let mut u = user(name, groups);
    u.uid = uid.into();
    u.extra = extra
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
        .collect::<BTreeMap<_, _>>();
    Some(u)
}

pub(super) fn cases() -> Vec<Case> {
    let base = |name, u| Case {
        name,
        user: u,
        impersonate_user: "",
        groups: &[],
        extras: &[],
        uid: "",
        expected: None,
        code: StatusCode::OK,
    };
    let forbidden = StatusCode::FORBIDDEN;
    let bad = StatusCode::BAD_REQUEST;
    vec![
        Case {
            expected: expect("tester", &[], "", &[]),
            ..base("not-impersonating", user("tester", &[]))
        },
        Case {
            impersonate_user: "anyone",
            code: forbidden,
            ..base("impersonating-error", user("tester", &[]))
        },
        Case {
            groups: &["some-group"],
            code: bad,
            ..base("impersonating-group-without-user", user("tester", &[]))
        },
        Case {
            extras: &[("scopes", &["scope-a"])],
            code: bad,
            ..base("impersonating-extra-without-user", user("tester", &[]))
        },
        Case {
            uid: "some-uid",
            code: bad,
            ..base("impersonating-uid-without-user", user("tester", &[]))
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group"],
            code: forbidden,
            ..base("disallowed-group", user("dev", &["wheel"]))
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group"],
            expected: expect(
                "system:admin",
                &["some-group", "system:authenticated"],
                "",
                &[],
            ),
            ..base(
                "allowed-group",
                user("dev", &["wheel", "group-impersonater"]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group"],
            extras: &[("scopes", &["scope-a"])],
            code: forbidden,
            ..base("disallowed-userextra-1", user("dev", &["wheel"]))
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group"],
            extras: &[("scopes", &["scope-a"])],
            code: forbidden,
            ..base(
                "disallowed-userextra-2",
                user("dev", &["wheel", "extra-setter-project"]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group"],
            extras: &[("scopes", &["scope-a", "scope-b"])],
            code: forbidden,
            ..base(
                "disallowed-userextra-3",
                user("dev", &["wheel", "extra-setter-particular-scopes"]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            extras: &[("scopes", &["scope-a", "scope-b"])],
            expected: expect(
                "system:admin",
                &["system:authenticated"],
                "",
                &[("scopes", &["scope-a", "scope-b"])],
            ),
            ..base(
                "allowed-userextras",
                user("dev", &["wheel", "extra-setter-scopes"]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            extras: &[(
                "example.com%2fescaped%e1%9b%84scopes",
                &["scope-a", "scope-b"],
            )],
            expected: expect(
                "system:admin",
                &["system:authenticated"],
                "",
                &[("example.com/escapedᛄscopes", &["scope-a", "scope-b"])],
            ),
            ..base(
                "percent-escaped-userextras",
                user("dev", &["wheel", "escaped-scopes"]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            extras: &[("almost%zzpercent%xxencoded", &["scope-a", "scope-b"])],
            expected: expect(
                "system:admin",
                &["system:authenticated"],
                "",
                &[("almost%zzpercent%xxencoded", &["scope-a", "scope-b"])],
            ),
            ..base(
                "almost-percent-escaped-userextras",
                user("dev", &["wheel", "almost-escaped-scopes"]),
            )
        },
        Case {
            impersonate_user: "tester",
            expected: expect("tester", &["system:authenticated"], "", &[]),
            ..base(
                "allowed-users-impersonation",
                user("dev", &["regular-impersonater"]),
            )
        },
        Case {
            impersonate_user: "tester",
            code: forbidden,
            ..base(
                "disallowed-impersonating",
                user("dev", &["sa-impersonater"]),
            )
        },
        Case {
            impersonate_user: "system:serviceaccount:foo:default",
            expected: expect(
                "system:serviceaccount:foo:default",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:foo",
                    "system:authenticated",
                ],
                "",
                &[],
            ),
            ..base(
                "allowed-sa-impersonating",
                user("dev", &["sa-impersonater"]),
            )
        },
        Case {
            impersonate_user: "system:anonymous",
            expected: expect("system:anonymous", &["system:unauthenticated"], "", &[]),
            ..base(
                "anonymous-username-prevents-adding-authenticated-group",
                user("system:admin", &[]),
            )
        },
        Case {
            impersonate_user: "unknown",
            groups: &["system:unauthenticated"],
            expected: expect("unknown", &["system:unauthenticated"], "", &[]),
            ..base(
                "unauthenticated-group-prevents-adding-authenticated-group",
                user("system:admin", &[]),
            )
        },
        Case {
            impersonate_user: "unknown",
            groups: &["system:authenticated"],
            expected: expect("unknown", &["system:authenticated"], "", &[]),
            ..base(
                "unauthenticated-group-prevents-double-adding-authenticated-group",
                user("system:admin", &[]),
            )
        },
        Case {
            impersonate_user: "system:admin",
            groups: &["some-group", "system:authenticated"],
            expected: expect(
                "system:admin",
                &["some-group", "system:authenticated"],
                "",
                &[],
            ),
            ..base(
                "specified-authenticated-group-prevents-double-adding-authenticated-group",
                user("dev", &["wheel", "group-impersonater"]),
            )
        },
        Case {
            impersonate_user: "system:anonymous",
            groups: &["system:unauthenticated"],
            expected: expect("system:anonymous", &["system:unauthenticated"], "", &[]),
            ..base(
                "anonymous-user-prevents-double-adding-unauthenticated-group",
                user("system:admin", &[]),
            )
        },
        Case {
            impersonate_user: "tester",
            uid: "some-uid",
            expected: expect("tester", &["system:authenticated"], "some-uid", &[]),
            ..base(
                "allowed-user-impersonation-with-uid",
                user("dev", &["everything-impersonater"]),
            )
        },
        Case {
            impersonate_user: "tester",
            uid: "disallowed-uid",
            code: forbidden,
            ..base(
                "disallowed-user-impersonation-with-uid",
                user("dev", &["everything-impersonater"]),
            )
        },
        Case {
            impersonate_user: "tester",
            uid: "some-uid",
            groups: &["system:authenticated"],
            extras: &[("scopes", &["scope-a", "scope-b"])],
            expected: expect(
                "tester",
                &["system:authenticated"],
                "some-uid",
                &[("scopes", &["scope-a", "scope-b"])],
            ),
            ..base(
                "allowed-impersonation-with-all-headers",
                user("dev", &["everything-impersonater"]),
            )
        },
    ]
}
