//! `StatusWriter` with `LeaderElection`, three replicas against the scripted API server:
//! only the leader writes `apiservices/status`, replicas that disagree do not make the
//! stored condition flip, a new leader writes what it sees once the old one is gone, and
//! a write that meets `409 Conflict` reads again and succeeds.

pub mod support;

use std::time::{Duration, Instant};

use kube_aggregator::apiservice::ConditionStatus;
use kube_aggregator::registry::Registry;
use kube_aggregator::transport::InMemoryTransport;
use kube_aggregator_kube::{ApiServiceWatch, Leadership, StatusWriter};
use serde_json::Value;
use support::{ScriptedApiServer, TIMING};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const NAME: &str = "v1beta1.metrics.k8s.io";

/// One gateway replica: its registry fed from the cluster, its candidacy, its writer.
struct Replica {
    registry: Registry,
    leadership: Leadership,
    writer: StatusWriter,
    feed: tokio::task::JoinHandle<()>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.feed.abort();
    }
}

fn replica(server: &ScriptedApiServer, i: usize) -> Replica {
    let registry = Registry::new(InMemoryTransport::new());
    let feed = tokio::spawn(registry.clone().run(ApiServiceWatch::new(server.client())));
    let leadership = support::candidacy(server, i);
    let writer = StatusWriter::spawn(server.client(), &registry, leadership.leading());
    Replica {
        registry,
        leadership,
        writer,
        feed,
    }
}

/// The stored `Available` condition: status, reason, message.
fn stored(server: &ScriptedApiServer) -> Option<(String, String, String)> {
    let object = server.object(APISERVICES, NAME)?;
    let conditions = object["status"]["conditions"].as_array()?.clone();
    let available = conditions.iter().find(|c| c["type"] == "Available")?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Some((
        text(&available["status"]),
        text(&available["reason"]),
        text(&available["message"]),
    ))
}

async fn until_stored(
    server: &ScriptedApiServer,
    within: Duration,
    expected: (&str, &str, &str),
) -> Duration {
    let expected = Some((
        expected.0.to_owned(),
        expected.1.to_owned(),
        expected.2.to_owned(),
    ));
    let condition = "the stored condition";
    support::until_equal(condition, within, &expected, || stored(server)).await
}

/// The status updates the server has served.
fn status_writes(server: &ScriptedApiServer) -> usize {
    let put = format!("PUT {APISERVICES}/{NAME}/status");
    server
        .requests()
        .iter()
        .filter(|r| r.starts_with(&put))
        .count()
}

async fn until_one_leads(replicas: &[Replica]) -> usize {
    let all: Vec<&Leadership> = replicas.iter().map(|r| &r.leadership).collect();
    support::until_one_leads(&all, TIMING.lease_duration * 3).await
}

async fn until_known(replicas: &[Replica]) {
    let start = Instant::now();
    while !replicas
        .iter()
        .all(|r| r.registry.snapshot().get(NAME).is_some())
    {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the APIService did not reach every replica"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const FAILED: &str = "FailedDiscoveryCheck";

#[tokio::test]
async fn only_the_leader_writes_and_a_new_leader_writes_what_it_sees() {
    let server = ScriptedApiServer::start().await;
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("kube-system", "metrics-server"),
    );
    let mut replicas: Vec<Replica> = (0..3).map(|i| replica(&server, i)).collect();
    until_known(&replicas).await;
    let leader = until_one_leads(&replicas).await;

    // The leader finds the backend available; the followers do not.
    for (i, r) in replicas.iter().enumerate() {
        if i == leader {
            r.registry.set_available_condition(
                NAME,
                ConditionStatus::True,
                "Passed",
                "all checks passed",
            );
        } else {
            r.registry.set_available_condition(
                NAME,
                ConditionStatus::False,
                FAILED,
                "follower says no",
            );
        }
    }
    until_stored(
        &server,
        Duration::from_secs(1),
        ("True", "Passed", "all checks passed"),
    )
    .await;
    let written = status_writes(&server);

    // The followers change their minds again and again: nothing is written.
    for k in 0..10 {
        for (i, r) in replicas.iter().enumerate() {
            if i != leader {
                let (status, reason) = if k % 2 == 0 {
                    (ConditionStatus::True, "Passed")
                } else {
                    (ConditionStatus::False, FAILED)
                };
                r.registry.set_available_condition(
                    NAME,
                    status,
                    reason,
                    &format!("follower, round {k}"),
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored(&server).unwrap().0, "True");
    assert_eq!(status_writes(&server), written, "a follower wrote");
    for (i, r) in replicas.iter().enumerate() {
        if i != leader {
            assert_eq!(r.writer.writes(), 0);
        }
    }
    assert_eq!(replicas[leader].writer.writes() as usize, written);
    // The followers still gate on their own view.
    for (i, r) in replicas.iter().enumerate() {
        if i != leader {
            assert!(!r.registry.snapshot().get(NAME).unwrap().is_available());
        }
    }

    // The leader dies; a follower takes over and writes what it sees.
    let killed = Instant::now();
    drop(replicas.remove(leader));
    let took = until_stored(
        &server,
        TIMING.lease_duration * 3,
        ("False", FAILED, "follower, round 9"),
    )
    .await;
    let bound =
        TIMING.lease_duration + TIMING.retry_period.mul_f64(4.4) + Duration::from_millis(200);
    assert!(
        killed.elapsed() <= bound,
        "the new leader wrote {took:?} after the kill, more than {bound:?}"
    );
    let next = until_one_leads(&replicas).await;
    assert_eq!(replicas[next].writer.writes(), 1);
    assert_eq!(status_writes(&server), written + 1);
    eprintln!(
        "status written by the new leader {:?} after the old one died",
        killed.elapsed()
    );
}

#[tokio::test]
async fn a_conflicting_write_reads_again_and_the_same_status_is_not_written_twice() {
    let server = ScriptedApiServer::start().await;
    server.apply(
        "metrics.k8s.io",
        "v1beta1",
        ("kube-system", "metrics-server"),
    );
    let r = replica(&server, 0);
    until_known(std::slice::from_ref(&r)).await;
    let start = Instant::now();
    while !r.leadership.is_leader() {
        assert!(
            start.elapsed() < TIMING.lease_duration,
            "a single replica did not lead"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    until_idle(&server).await;

    // Another writer moves the object between the read and the write, twice.
    server.interfere_with_updates(2);
    let before = status_writes(&server);
    r.registry
        .set_available_condition(NAME, ConditionStatus::False, FAILED, "no route to host");
    until_stored(
        &server,
        Duration::from_secs(1),
        ("False", FAILED, "no route to host"),
    )
    .await;
    assert_eq!(
        status_writes(&server) - before,
        3,
        "two conflicts, then the write"
    );

    // The same status again (another replica's watch, a resync): not written.
    let writes = r.writer.writes();
    r.registry
        .set_available_condition(NAME, ConditionStatus::False, FAILED, "no route to host");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.writer.writes(), writes);
    assert_eq!(status_writes(&server) - before, 3);
}

/// Waits until no status write has been made for a while (the new leader's first round).
async fn until_idle(server: &ScriptedApiServer) {
    let mut last = status_writes(server);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = status_writes(server);
        if now == last {
            return;
        }
        last = now;
    }
}
