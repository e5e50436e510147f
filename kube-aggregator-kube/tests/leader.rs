//! `LeaderElection` against the scripted API server's Leases: of three candidates exactly
//! one leads and the Lease names it; when the leader dies, another takes over once the
//! lease duration has passed since it last saw the Lease renewed, and not before.

pub mod support;

use std::time::{Duration, Instant};

use kube_aggregator_kube::{Leadership, LeaseTiming};
use support::{ScriptedApiServer, TIMING};

const LEASES: &str = "/apis/coordination.k8s.io/v1/leases";
const LEASE: &str = "kube-system/kube-aggregator";

fn candidates(server: &ScriptedApiServer, n: usize) -> Vec<Leadership> {
    (0..n).map(|i| support::candidacy(server, i)).collect()
}

/// [`support::until_one_leads`] over `candidates`.
async fn until_one_leads(candidates: &[Leadership], within: Duration) -> usize {
    let all: Vec<&Leadership> = candidates.iter().collect();
    support::until_one_leads(&all, within).await
}

#[tokio::test]
async fn exactly_one_of_three_leads_and_the_lease_names_it() {
    let server = ScriptedApiServer::start().await;
    let candidates = candidates(&server, 3);
    let leader = until_one_leads(&candidates, Duration::from_secs(3)).await;
    let name = candidates[leader].identity().to_owned();

    // For two lease durations, the same one leads, alone, and renews.
    let first_renewal = server.object(LEASES, LEASE).unwrap()["spec"]["renewTime"].clone();
    let until = Instant::now() + 2 * TIMING.lease_duration;
    while Instant::now() < until {
        let leading: Vec<&str> = candidates
            .iter()
            .filter(|c| c.is_leader())
            .map(Leadership::identity)
            .collect();
        assert_eq!(leading, [name.as_str()]);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lease = server.object(LEASES, LEASE).unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], name.as_str());
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2);
    assert_eq!(lease["spec"]["leaseTransitions"], 0);
    assert_ne!(
        lease["spec"]["renewTime"], first_renewal,
        "the leader renews"
    );
    for candidate in &candidates {
        assert_eq!(candidate.leader().as_deref(), Some(name.as_str()));
    }
}

#[tokio::test]
async fn when_the_leader_dies_another_leads_after_the_lease_duration() {
    let server = ScriptedApiServer::start().await;
    let mut candidates = candidates(&server, 3);
    let leader = until_one_leads(&candidates, Duration::from_secs(3)).await;
    let old = candidates.remove(leader);
    let old_name = old.identity().to_owned();
    // Let the followers see a few renewals, then kill the leader: it stops renewing.
    tokio::time::sleep(TIMING.lease_duration).await;
    let killed = Instant::now();
    drop(old);

    let next = until_one_leads(&candidates, TIMING.lease_duration * 3).await;
    let took = killed.elapsed();
    // A follower takes over once the lease duration has passed since it last saw the
    // Lease change (at most a jittered retry period after the last renewal), and its
    // next try (another jittered retry period) takes it.
    let bound = TIMING.lease_duration + TIMING.retry_period.mul_f64(4.4);
    assert!(took <= bound, "took {took:?}, more than {bound:?}");
    // Not before: the last renewal was at most a retry period before the kill.
    let earliest = TIMING.lease_duration - 2 * TIMING.retry_period;
    assert!(
        took >= earliest,
        "took over after {took:?}, before {earliest:?}"
    );

    let name = candidates[next].identity().to_owned();
    assert_ne!(name, old_name);
    let lease = server.object(LEASES, LEASE).unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], name.as_str());
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    eprintln!("leader killed; {name} led {took:?} later");
}

#[test]
fn timing_is_checked_as_client_go_does() {
    let bad = LeaseTiming {
        renew_deadline: Duration::from_secs(15),
        ..LeaseTiming::default()
    };
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "leader election: lease duration (15s) must be greater than renew deadline (15s)"
    );
    let bad = LeaseTiming {
        retry_period: Duration::from_secs(9),
        ..LeaseTiming::default()
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("must be greater than retry period (9s) * 1.2")
    );
    LeaseTiming::default().validate().unwrap();
}
