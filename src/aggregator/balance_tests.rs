//! The balancer on its own, on a hand-moved clock: the spread, the choice of the less
//! loaded endpoint, ejection after consecutive failures (and not of more than the allowed
//! share), ejection times that grow, probes and trials.

use std::collections::HashMap;

use super::*;

fn many(n: usize) -> ServiceEndpoints {
    ServiceEndpoints::from_addresses((0..n).map(|i| {
        format!("10.0.0.{}:443", i + 1)
            .parse::<Authority>()
            .unwrap()
    }))
    .unwrap()
}

fn endpoint(i: usize) -> Authority {
    format!("10.0.0.{}:443", i + 1).parse().unwrap()
}

fn balancer(config: OutlierDetection) -> Arc<Balancer> {
    Arc::new(Balancer::new(config))
}

fn config() -> OutlierDetection {
    OutlierDetection {
        consecutive_failures: 3,
        base_ejection_time: Duration::from_secs(10),
        max_ejection_time: Duration::from_secs(25),
        max_ejection_percent: 50,
    }
}

/// Sends `n` requests at `now` that end as `fails` says for their endpoint; how many
/// went to each endpoint.
fn send(
    b: &Arc<Balancer>,
    endpoints: &ServiceEndpoints,
    n: usize,
    now: Instant,
    fails: impl Fn(&Authority) -> bool,
) -> HashMap<Authority, usize> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        let (picked, due) = b.pick(endpoints, now, true);
        assert!(due.is_empty());
        *counts.entry(picked.authority().clone()).or_default() += 1;
        let failed = fails(picked.authority());
        picked.finish(failed, now);
    }
    counts
}

#[test]
fn one_address_is_used_as_it_is_and_nothing_is_kept() {
    let b = balancer(config());
    let one = ServiceEndpoints::One(endpoint(0));
    let (picked, due) = b.pick(&one, Instant::now(), true);
    assert_eq!(picked.authority(), &endpoint(0));
    assert!(!picked.is_balanced() && due.is_empty());
    for _ in 0..10 {
        let (picked, _) = b.pick(&one, Instant::now(), true);
        assert_eq!(picked.finish(true, Instant::now()), None, "never ejected");
    }
    assert!(b.lock().is_empty());
}

#[test]
fn requests_spread_over_every_endpoint_and_avoid_the_loaded_one() {
    let b = balancer(config());
    let three = many(3);
    let now = Instant::now();
    let counts = send(&b, &three, 3000, now, |_| false);
    for i in 0..3 {
        let share = counts[&endpoint(i)];
        assert!((700..1300).contains(&share), "{counts:?}");
    }
    // A request held on the first endpoint: the next ones go to the other two, which
    // finish theirs at once.
    let held = loop {
        let (picked, _) = b.pick(&three, now, true);
        if picked.authority() == &endpoint(0) {
            break picked;
        }
        picked.finish(false, now);
    };
    let counts = send(&b, &three, 300, now, |_| false);
    assert_eq!(counts.get(&endpoint(0)), None, "{counts:?}");
    drop(held);
    assert_eq!(b.lock()[&endpoint(0)].in_flight, 0);
}

#[test]
fn consecutive_failures_eject_an_endpoint_until_its_probe_passes() {
    let b = balancer(config());
    let three = many(3);
    let t0 = Instant::now();
    let dead = endpoint(1);
    // Two failures, then a success: no ejection.
    for failed in [true, true, false, true, true] {
        assert_eq!(b.finish_on(&three, &dead, failed, t0), None);
    }
    // The third in a row ejects it, for the base time.
    assert_eq!(
        b.finish_on(&three, &dead, true, t0),
        Some(Duration::from_secs(10))
    );
    assert!(b.is_out(&dead, t0));
    let counts = send(&b, &three, 200, t0, |_| false);
    assert_eq!(counts.get(&dead), None, "no request to an ejected endpoint");

    // Its time is up: the next pick hands it over for a probe, and it stays out.
    let t1 = t0 + Duration::from_secs(10);
    let (picked, due) = b.pick(&three, t1, true);
    assert_eq!(due, std::slice::from_ref(&dead));
    assert_ne!(picked.authority(), &dead);
    drop(picked);
    assert!(b.is_out(&dead, t1));
    // The probe fails: out again, for twice as long.
    assert_eq!(b.probed(&dead, false, t1), Some(Duration::from_secs(20)));
    let t2 = t1 + Duration::from_secs(20);
    let (_, due) = b.pick(&three, t2, true);
    assert_eq!(due, std::slice::from_ref(&dead));
    // The probe passes: back in.
    assert_eq!(b.probed(&dead, true, t2), None);
    assert!(!b.is_out(&dead, t2));
    let counts = send(&b, &three, 300, t2, |_| false);
    assert!(counts[&dead] > 50, "{counts:?}");

    // Failing again soon after, it is out for longer still, capped.
    for _ in 0..2 {
        b.finish_on(&three, &dead, true, t2);
    }
    assert_eq!(
        b.finish_on(&three, &dead, true, t2),
        Some(Duration::from_secs(25))
    );
}

#[test]
fn at_most_the_allowed_share_is_ejected() {
    let b = balancer(config());
    let three = many(3);
    let now = Instant::now();
    for _ in 0..3 {
        b.finish_on(&three, &endpoint(0), true, now);
    }
    assert!(b.is_out(&endpoint(0), now));
    // A second failing endpoint of three stays in: half of three is one.
    for _ in 0..10 {
        assert_eq!(b.finish_on(&three, &endpoint(1), true, now), None);
    }
    assert!(!b.is_out(&endpoint(1), now));
}

#[test]
fn without_probes_an_endpoint_comes_back_on_trial() {
    let b = balancer(config());
    let two = many(2);
    let t0 = Instant::now();
    for _ in 0..3 {
        b.finish_on(&two, &endpoint(0), true, t0);
    }
    assert!(b.is_out(&endpoint(0), t0));
    let t1 = t0 + Duration::from_secs(10);
    let (picked, due) = b.pick(&two, t1, false);
    assert!(due.is_empty());
    drop(picked);
    assert!(!b.is_out(&endpoint(0), t1), "back on trial");
    // One failure and it is out again, for longer.
    assert_eq!(
        b.finish_on(&two, &endpoint(0), true, t1),
        Some(Duration::from_secs(20))
    );
}

impl Balancer {
    /// Sends one request to `authority` of `endpoints`, ending as `failed` says.
    fn finish_on(
        self: &Arc<Self>,
        endpoints: &ServiceEndpoints,
        authority: &Authority,
        failed: bool,
        now: Instant,
    ) -> Option<Duration> {
        self.lock().entry(authority.clone()).or_default().in_flight += 1;
        let ServiceEndpoints::Many(all) = endpoints else {
            unreachable!("several endpoints")
        };
        let picked = Picked {
            authority: authority.clone(),
            tracked: Some((self.clone(), all.clone())),
        };
        picked.finish(failed, now)
    }
}
