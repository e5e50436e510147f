//! The log backend: lines as upstream writes them, rotation by size with the backups kept
//! as configured, and errors that name the file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::UNIX_EPOCH;

use super::rotate::{backup_name, backup_time};
use super::*;
use crate::audit::event::{EventUser, ObjectReference, RequestMetadata, ResponseStatus};
use crate::audit::{Level, Processed, Stage};

/// A fresh directory under the target directory, named for the test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/tmp/audit-log")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn event(n: usize) -> Event {
    let at = UNIX_EPOCH + Duration::from_micros(1_765_000_000_120_000);
    let mut event = Event::new(
        Level::Metadata,
        RequestMetadata {
            audit_id: format!("id-{n}"),
            received: at,
            request_uri: "/apis/example.com/v1/namespaces/ns/widgets?watch=1".into(),
            verb: "watch".into(),
            user: EventUser {
                username: "alice".into(),
                groups: vec!["admins".into(), "system:authenticated".into()],
                ..EventUser::default()
            },
            source_ips: vec!["192.0.2.1".into(), "127.0.0.1".into()],
            user_agent: "kubectl/v1.32.0".into(),
            object_ref: Some(ObjectReference {
                resource: "widgets".into(),
                namespace: "ns".into(),
                ..ObjectReference::default()
            }),
        },
    );
    event.stage = Stage::ResponseComplete;
    event.response_status = Some(ResponseStatus::code(200));
    event
}

fn files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn events_are_json_lines_in_a_new_private_file() {
    let dir = scratch("json");
    let path = dir.join("nested/audit.log");
    let sink = LogSink::open(LogConfig::new(&path)).unwrap();
    for n in 0..3 {
        assert!(matches!(sink.process_event(&event(n)), Processed::Kept));
    }
    sink.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["apiVersion"], "audit.k8s.io/v1");
            v["auditID"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids, ["id-0", "id-1", "id-2"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.join("nested"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    // A second sink appends.
    drop(sink);
    let sink = LogSink::open(LogConfig::new(&path)).unwrap();
    sink.process_event(&event(3));
    sink.flush();
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);
}

#[test]
fn the_file_rotates_by_size_and_keeps_the_newest_backups() {
    let dir = scratch("rotate");
    let path = dir.join("audit.log");
    let line_len = event(10).to_json_line().len() as u64;
    let sink = LogSink::open(LogConfig {
        max_size: 3 * line_len,
        max_backups: 2,
        ..LogConfig::new(&path)
    })
    .unwrap();
    // 10..=20: eleven lines, three per file: four rotations, two backups kept.
    for n in 10..=20 {
        sink.process_event(&event(n));
        // One line at a time, so each rotation is its own millisecond or later.
        sink.flush();
        std::thread::sleep(Duration::from_millis(2));
    }
    let files = files(&dir);
    assert_eq!(files.len(), 3, "{:?}", files.keys());
    let ids = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["auditID"].to_string())
            .collect()
    };
    assert_eq!(ids(&files["audit.log"]), ["\"id-19\"", "\"id-20\""]);
    let backups: Vec<(&String, &String)> = files
        .iter()
        .filter(|(name, _)| *name != "audit.log")
        .collect();
    for (name, _) in &backups {
        // audit-2026-12-06T14-05-00.123.log
        assert!(backup_time(name, "audit", ".log").is_some(), "{name}");
        assert_eq!(name.len(), "audit-2026-12-06T14-05-00.123.log".len());
    }
    // Names sort by time: the older backup holds 13..=15, the newer 16..=18.
    assert_eq!(ids(backups[0].1), ["\"id-13\"", "\"id-14\"", "\"id-15\""]);
    assert_eq!(ids(backups[1].1), ["\"id-16\"", "\"id-17\"", "\"id-18\""]);
    assert!(files.values().all(|t| t.len() as u64 <= 3 * line_len));
}

#[test]
fn backups_older_than_the_max_age_are_removed_at_rotation() {
    let dir = scratch("age");
    let path = dir.join("audit.log");
    let day = Duration::from_secs(24 * 3600);
    let old = backup_name("audit", ".log", SystemTime::now() - 400 * day);
    let recent = backup_name("audit", ".log", SystemTime::now() - 10 * day);
    let other = "audit-notatime.log".to_owned();
    for name in [&old, &recent, &other] {
        std::fs::write(dir.join(name), "x\n").unwrap();
    }
    let line_len = event(0).to_json_line().len() as u64;
    let sink = LogSink::open(LogConfig {
        max_size: line_len,
        max_backups: 0,
        max_age_days: 366,
        ..LogConfig::new(&path)
    })
    .unwrap();
    sink.process_event(&event(0));
    sink.process_event(&event(1));
    sink.flush();
    let files = files(&dir);
    assert!(!files.contains_key(&old), "{:?}", files.keys());
    assert!(files.contains_key(&recent));
    assert!(files.contains_key(&other), "not a backup: left alone");
    assert_eq!(files.len(), 4, "{:?}", files.keys());
}

#[test]
fn the_legacy_format_is_upstreams_event_string() {
    let mut e = event(7);
    e.impersonated_user = Some(EventUser {
        username: "dave".into(),
        groups: vec!["devs".into()],
        ..EventUser::default()
    });
    assert_eq!(
        legacy_line(&e),
        concat!(
            r#"2025-12-06T05:46:40.12Z AUDIT: id="id-7" stage="ResponseComplete" ip="192.0.2.1" "#,
            r#"method="watch" user="alice" groups="\"admins\",\"system:authenticated\"" "#,
            r#"as="dave" asgroups="\"devs\"" user-agent="kubectl/v1.32.0" namespace="ns" "#,
            r#"uri="/apis/example.com/v1/namespaces/ns/widgets?watch=1" response="200""#,
            "\n"
        )
    );
    let mut e = event(8);
    e.user = EventUser::default();
    e.response_status = None;
    e.object_ref = None;
    e.source_ips.clear();
    e.request_received_timestamp = UNIX_EPOCH + Duration::from_secs(1_765_000_000);
    assert_eq!(
        legacy_line(&e),
        concat!(
            r#"2025-12-06T05:46:40Z AUDIT: id="id-8" stage="ResponseComplete" ip="<unknown>" "#,
            r#"method="watch" user="<none>" groups="<none>" as="<self>" asgroups="<lookup>" "#,
            r#"user-agent="kubectl/v1.32.0" namespace="<none>" "#,
            r#"uri="/apis/example.com/v1/namespaces/ns/widgets?watch=1" response="<deferred>""#,
            "\n"
        )
    );
}

#[test]
fn bad_settings_are_refused_with_what_failed() {
    assert_eq!(
        "yaml".parse::<LogFormat>().unwrap_err().to_string(),
        "invalid audit log format yaml, allowed formats are \"legacy,json\""
    );
    assert_eq!("legacy".parse::<LogFormat>(), Ok(LogFormat::Legacy));
    let dir = scratch("bad");
    std::fs::write(dir.join("file"), "").unwrap();
    let path = dir.join("file/audit.log");
    let err = LogSink::open(LogConfig::new(&path))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("opening the audit log {}: ", path.display())),
        "{err}"
    );
}
