//! The token file against apiserver's `tokenfile_test.go`: lookups, the load failures
//! that name their line, and the CSV quirks of Go's `encoding/csv`.

use futures_util::FutureExt;

use super::*;

const FILE: &str = "token1,user1,uid1
token2,user2,uid2
token3,user3,uid3,\"group1,group2\"
token4,user4,uid4,\"group2\"
token5,user5,uid5,group5
token6,user6,uid6,group5,otherdata
token7,user7,uid7,\"group1,group2\",otherdata
";

#[test]
fn vectors_4_2_lookup() {
    let a = TokenFileAuthenticator::from_csv(FILE).unwrap();
    let want: [(&str, &str, &str, &[&str]); 7] = [
        ("token1", "user1", "uid1", &[]),
        ("token2", "user2", "uid2", &[]),
        ("token3", "user3", "uid3", &["group1", "group2"]),
        ("token4", "user4", "uid4", &["group2"]),
        ("token5", "user5", "uid5", &["group5"]),
        ("token6", "user6", "uid6", &["group5"]),
        ("token7", "user7", "uid7", &["group1", "group2"]),
    ];
    for (token, name, uid, groups) in want {
        let u = a
            .authenticate_token(token, &[])
            .now_or_never()
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((u.name.as_str(), u.uid.as_str()), (name, uid));
        assert_eq!(u.groups, groups);
    }
    assert_eq!(
        a.authenticate_token("token8", &[]).now_or_never().unwrap(),
        Ok(None)
    );
}

#[test]
fn vectors_4_2_load_failures_name_the_line() {
    let err = TokenFileAuthenticator::from_csv("token1,user1,uid1\ntoken3,user3\n").unwrap_err();
    assert_eq!(err.line, Some(2));
    assert_eq!(
        err.to_string(),
        "token file line 2: must have at least 3 columns (token, user name, user uid), found 2"
    );
    assert!(TokenFileAuthenticator::from_csv("token4").is_err());
    assert!(TokenFileAuthenticator::from_csv("token4\n").is_err());
    assert!(TokenFileAuthenticator::from_csv("\n\nt,u,\"unterminated\n").is_err());
    assert!(TokenFileAuthenticator::from_csv("t,u\"x,uid\n").is_err());
    let a = TokenFileAuthenticator::from_csv(",user5,uid5\n").unwrap();
    assert!(a.is_empty());
}

#[test]
fn csv_quirks() {
    let a = TokenFileAuthenticator::from_csv("a,u1,1\r\n\r\na,u2,2\n\"q\"\"t\",u3,3,\"x\ny\"\n")
        .unwrap();
    assert_eq!(a.lookup("a").unwrap().name, "u2", "the last duplicate wins");
    assert_eq!(a.lookup("q\"t").unwrap().groups, ["x\ny"]);
    let err = TokenFileAuthenticator::from_csv("a,b,c\n\"x\ny\",z\n").unwrap_err();
    assert_eq!(
        err.line,
        Some(2),
        "a record is reported at the line it starts on"
    );
}

#[test]
fn file_errors_name_the_file() {
    let err = TokenFileAuthenticator::from_file(Path::new("/nonexistent/tokens.csv")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("token file /nonexistent/tokens.csv"),
        "{err}"
    );
}
