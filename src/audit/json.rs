//! An [`Event`]'s JSON line, written field by field: the same bytes as its `Serialize`
//! derive gives through Go's escaping (a test holds them equal), without serde's
//! per-field machinery and with the strings escaped sixteen bytes at a time. Two events
//! per audited request make this the audit layer's main cost.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::SystemTime;

use super::event::{Event, EventUser, ObjectReference, ResponseStatus};
use crate::gocompat::json::{write, write_str};
use crate::gocompat::micro_time;

/// `event` as one JSON line, ending in `\n`, appended to `out`.
impl Event {
    /// [`Event::to_json`] as one line, ending in `\n`: the bytes the `Serialize` derive
    /// gives through Go's escaping, written field by field into one buffer.
    pub fn to_json_line(&self) -> Vec<u8> {
        let mut line = Vec::new();
        self.write_json_line(&mut line);
        line
    }

    /// [`Event::to_json_line`] appended to `out`.
    pub fn write_json_line(&self, out: &mut Vec<u8>) {
        line(out, self);
    }
}

fn line(out: &mut Vec<u8>, event: &Event) {
    out.reserve(1024);
    let mut o = Object::open(out);
    o.plain("kind", event.kind);
    o.plain("apiVersion", event.api_version);
    o.plain("level", event.level.as_str());
    o.str("auditID", &event.audit_id);
    o.plain("stage", event.stage.as_str());
    o.str("requestURI", &event.request_uri);
    o.str("verb", &event.verb);
    o.key("user");
    user(o.out, &event.user);
    if let Some(imp) = &event.impersonated_user {
        o.key("impersonatedUser");
        user(o.out, imp);
    }
    if !event.source_ips.is_empty() {
        o.key("sourceIPs");
        // Addresses as `IpAddr` writes them (see `source_ips`) need no escaping; a
        // host's own are checked.
        o.out.push(b'[');
        for (i, ip) in event.source_ips.iter().enumerate() {
            if i > 0 {
                o.out.push(b',');
            }
            if ip
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b':')
            {
                write_plain(o.out, ip);
            } else {
                write_str(o.out, ip);
            }
        }
        o.out.push(b']');
    }
    o.non_empty("userAgent", &event.user_agent);
    if let Some(r) = &event.object_ref {
        o.key("objectRef");
        object_ref(o.out, r);
    }
    if let Some(s) = &event.response_status {
        o.key("responseStatus");
        response_status(o.out, s);
    }
    if let Some(v) = &event.request_object {
        o.serde("requestObject", v);
    }
    if let Some(v) = &event.response_object {
        o.serde("responseObject", v);
    }
    o.time("requestReceivedTimestamp", event.request_received_timestamp);
    o.time("stageTimestamp", event.stage_timestamp);
    if !event.annotations.is_empty() {
        o.key("annotations");
        let mut a = Object::open(o.out);
        for (k, v) in &event.annotations {
            a.key_escaped(k);
            write_str(a.out, v);
        }
        a.close();
    }
    o.close();
    out.push(b'\n');
}

fn user(out: &mut Vec<u8>, user: &EventUser) {
    let mut o = Object::open(out);
    o.non_empty("username", &user.username);
    o.non_empty("uid", &user.uid);
    if !user.groups.is_empty() {
        o.key("groups");
        strings(o.out, &user.groups);
    }
    if !user.extra.is_empty() {
        o.key("extra");
        extra(o.out, &user.extra);
    }
    o.close();
}

fn extra(out: &mut Vec<u8>, extra: &BTreeMap<String, Vec<String>>) {
    let mut o = Object::open(out);
    for (k, values) in extra {
        o.key_escaped(k);
        strings(o.out, values);
    }
    o.close();
}

fn object_ref(out: &mut Vec<u8>, r: &ObjectReference) {
    let mut o = Object::open(out);
    o.non_empty("resource", &r.resource);
    o.non_empty("namespace", &r.namespace);
    o.non_empty("name", &r.name);
    o.non_empty("apiGroup", &r.api_group);
    o.non_empty("apiVersion", &r.api_version);
    o.non_empty("subresource", &r.subresource);
    o.close();
}

fn response_status(out: &mut Vec<u8>, s: &ResponseStatus) {
    let mut o = Object::open(out);
    o.key("metadata");
    o.out.extend_from_slice(b"{}");
    o.non_empty("status", &s.status);
    o.non_empty("message", &s.message);
    o.non_empty("reason", &s.reason);
    if let Some(details) = &s.details {
        o.serde("details", details);
    }
    if s.code != 0 {
        o.key("code");
        let _ = write!(o.out, "{}", s.code);
    }
    o.close();
}

fn strings(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, item);
    }
    out.push(b']');
}

/// `s`, which has nothing to escape, quoted.
fn write_plain(out: &mut Vec<u8>, s: &str) {
    debug_assert!(
        s.bytes()
            .all(|b| (0x20..0x80).contains(&b) && !b"\"\\&<>".contains(&b))
    );
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// A JSON object being written: `{`, then `"key":value` pairs with commas between.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>) -> Object<'a> {
        out.push(b'{');
        Object { out, empty: true }
    }

    fn comma(&mut self) {
        if !std::mem::take(&mut self.empty) {
            self.out.push(b',');
        }
    }

    /// A key of this module's: ASCII letters, which need no escaping.
    fn key(&mut self, key: &'static str) {
        self.comma();
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// A key from the data (an annotation's, an extra attribute's).
    fn key_escaped(&mut self, key: &str) {
        self.comma();
        write_str(self.out, key);
        self.out.push(b':');
    }

    fn str(&mut self, key: &'static str, value: &str) {
        self.key(key);
        write_str(self.out, value);
    }

    /// A value of this crate's that needs no escaping: a constant, an enum's name.
    fn plain(&mut self, key: &'static str, value: &'static str) {
        self.key(key);
        write_plain(self.out, value);
    }

    fn non_empty(&mut self, key: &'static str, value: &str) {
        if !value.is_empty() {
            self.str(key, value);
        }
    }

    /// A value serde writes (the rare ones: objects, Status details).
    fn serde<T: serde::Serialize>(&mut self, key: &'static str, value: &T) {
        self.key(key);
        if write(self.out, value).is_err() {
            // Not reached for these types (string keys only); the line stays JSON.
            self.out.extend_from_slice(b"null");
        }
    }

    fn time(&mut self, key: &'static str, at: SystemTime) {
        self.key(key);
        self.out.push(b'"');
        micro_time(self.out, at);
        self.out.push(b'"');
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::audit::event::RequestMetadata;
    use crate::audit::{Level, Stage};
    use crate::status::{StatusCause, StatusDetails};

    /// What the `Serialize` derive writes through Go's escaping: the reference.
    fn derived(event: &Event) -> String {
        String::from_utf8(crate::gocompat::json::to_line(event, 0)).unwrap()
    }

    fn metadata(tricky: &str) -> RequestMetadata {
        RequestMetadata {
            audit_id: format!("id-{tricky}"),
            received: UNIX_EPOCH + Duration::from_micros(1_765_000_000_123_456),
            request_uri: format!("/api/v1/namespaces/a/pods?labelSelector={tricky}"),
            verb: "list".into(),
            user: EventUser {
                username: format!("user{tricky}"),
                uid: "1".into(),
                groups: vec!["system:authenticated".into(), tricky.into()],
                extra: BTreeMap::from([
                    (format!("scopes{tricky}"), vec!["a".into(), tricky.into()]),
                    ("empty".into(), vec![]),
                ]),
            },
            source_ips: vec!["10.0.0.1".into(), "2001:db8::1".into(), tricky.into()],
            user_agent: format!("kubectl/v1.32.0 {tricky}"),
            object_ref: Some(ObjectReference {
                resource: "pods".into(),
                namespace: "a".into(),
                name: tricky.into(),
                api_group: String::new(),
                api_version: "v1".into(),
                subresource: "log".into(),
            }),
        }
    }

    #[test]
    fn times_are_humantime_s() {
        let check = |at: SystemTime| {
            let mut ours = Vec::new();
            micro_time(&mut ours, at);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                humantime::format_rfc3339_micros(at).to_string()
            );
        };
        // Every day from 1970 to past 2100 (leap years, centuries, month ends), at a
        // time of day that moves, and the edges.
        for day in 0..48_000u64 {
            let secs = day * 86_400 + (day * 7919) % 86_400;
            check(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(day % 1_000_000));
        }
        let last =
            UNIX_EPOCH + Duration::from_secs(253_402_300_799) + Duration::from_micros(999_999);
        check(UNIX_EPOCH);
        check(last);
        // Outside what RFC 3339 years can say: clamped, never a panic.
        let text = |at| {
            let mut out = Vec::new();
            micro_time(&mut out, at);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            text(last + Duration::from_secs(1)),
            "9999-12-31T23:59:59.999999Z"
        );
    }

    #[test]
    fn lines_are_the_derive_s_bytes() {
        let tricky = "<x>&\"q\"\\\n\t\u{1}\u{2028}\u{2029}é\u{20ac}";
        let mut events = Vec::new();
        // The least an event has: no user, no optional field.
        events.push(Event::new(
            Level::Metadata,
            RequestMetadata {
                audit_id: String::new(),
                received: UNIX_EPOCH,
                request_uri: "/".into(),
                verb: String::new(),
                user: EventUser::default(),
                source_ips: vec![],
                user_agent: String::new(),
                object_ref: None,
            },
        ));
        for tricky in ["", "plain", tricky] {
            let mut e = Event::new(Level::RequestResponse, metadata(tricky));
            events.push(e.clone());
            e.stage = Stage::ResponseComplete;
            e.stage_timestamp = e.request_received_timestamp + Duration::from_micros(1500);
            e.impersonated_user = Some(EventUser {
                username: format!("bob{tricky}"),
                ..EventUser::default()
            });
            e.response_status = Some(ResponseStatus::code(200));
            events.push(e.clone());
            e.response_status = Some(ResponseStatus::of_status(
                &crate::status::Status::failure(
                    http::StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("bad {tricky}"),
                )
                .with_details(StatusDetails {
                    name: tricky.into(),
                    causes: vec![StatusCause {
                        reason: "FieldValueInvalid".into(),
                        ..StatusCause::default()
                    }],
                    retry_after_seconds: 3,
                    ..StatusDetails::default()
                }),
            ));
            e.request_object = Some(serde_json::json!({"kind": tricky, "n": [1, 2.5, null]}));
            e.response_object = Some(serde_json::json!({"b": true, "a": {}}));
            e.annotations
                .insert("authorization.k8s.io/decision".into(), "allow".into());
            e.annotations.insert(format!("k{tricky}"), tricky.into());
            events.push(e.clone());
            e.response_status = Some(ResponseStatus::closed_early());
            events.push(e);
        }
        for e in &events {
            let mut ours = b"kept".to_vec();
            line(&mut ours, e);
            let ours = String::from_utf8(ours).unwrap();
            let ours = ours.strip_prefix("kept").unwrap();
            assert_eq!(ours, derived(e));
            // And it is JSON that reads back.
            let _: serde_json::Value = serde_json::from_str(ours).unwrap();
        }
    }
}
