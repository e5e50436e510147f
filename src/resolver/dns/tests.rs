//! The DNS resolver against a DNS server on 127.0.0.1 started here: a UDP server that
//! answers A queries from a table, with each record's TTL, and NXDOMAIN for the rest.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_resolver::proto::op::{Message, MessageType, ResponseCode};
use hickory_resolver::proto::rr::rdata::A;
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;

use super::DnsServiceResolver;
use crate::apiservice::ServiceReference;
use crate::availability::UnavailableCause;
use crate::resolver::{ResolveError, ServiceResolver};

/// A DNS server: fully qualified lower-case name to (address, TTL in seconds).
struct DnsServer {
    addr: SocketAddr,
    records: Arc<Mutex<HashMap<String, (Ipv4Addr, u32)>>>,
    queries: Arc<AtomicUsize>,
}

impl DnsServer {
    async fn start() -> DnsServer {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let records: Arc<Mutex<HashMap<String, (Ipv4Addr, u32)>>> = Arc::default();
        let queries = Arc::new(AtomicUsize::new(0));
        let (table, count) = (records.clone(), queries.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let answer = answer(&query, &table.lock().unwrap());
                let _ = socket.send_to(&answer.to_vec().unwrap(), from).await;
            }
        });
        DnsServer {
            addr,
            records,
            queries,
        }
    }

    fn set(&self, name: &str, ip: [u8; 4], ttl: u32) {
        self.records
            .lock()
            .unwrap()
            .insert(name.to_owned(), (Ipv4Addr::from(ip), ttl));
    }

    fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

/// The answer to `query` from `records`: the A record of a known name, an empty answer
/// for its other types, NXDOMAIN for an unknown name.
fn answer(query: &Message, records: &HashMap<String, (Ipv4Addr, u32)>) -> Message {
    let mut res = Message::new();
    res.set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_authoritative(true)
        .add_queries(query.queries().to_vec());
    for q in query.queries() {
        let name = q.name().to_ascii().to_lowercase();
        match records.get(&name) {
            Some((ip, ttl)) if q.query_type() == RecordType::A => {
                res.add_answer(Record::from_rdata(q.name().clone(), *ttl, RData::A(A(*ip))));
            }
            Some(_) => {}
            None => {
                res.set_response_code(ResponseCode::NXDomain);
            }
        }
    }
    res
}

fn service(namespace: &str, name: &str, port: Option<i32>) -> ServiceReference {
    ServiceReference {
        namespace: namespace.into(),
        name: name.into(),
        port,
    }
}

#[tokio::test]
async fn a_service_resolves_to_its_cluster_ip_with_the_apiservice_port() {
    let dns = DnsServer::start().await;
    dns.set(
        "metrics-server.kube-system.svc.cluster.local.",
        [10, 96, 0, 7],
        30,
    );
    let resolver = DnsServiceResolver::with_name_servers(&[dns.addr]);
    let svc = service("kube-system", "metrics-server", None);
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.96.0.7:443");
    let on_8443 = service("kube-system", "metrics-server", Some(8443));
    assert_eq!(resolver.resolve(&on_8443).await.unwrap(), "10.96.0.7:8443");
    // Within the TTL the answer comes from memory: no further query.
    let asked = dns.queries();
    for _ in 0..5 {
        assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.96.0.7:443");
    }
    assert_eq!(dns.queries(), asked);
}

#[tokio::test]
async fn an_answer_is_kept_for_its_ttl_and_asked_again_after() {
    let dns = DnsServer::start().await;
    let name = "api.team-a.svc.cluster.local.";
    dns.set(name, [10, 0, 0, 1], 1);
    let resolver = DnsServiceResolver::with_name_servers(&[dns.addr]);
    let svc = service("team-a", "api", Some(443));
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.0.0.1:443");
    // The Service moved; the old answer holds until its TTL has passed.
    dns.set(name, [10, 0, 0, 2], 1);
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.0.0.1:443");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.0.0.2:443");
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_name_resolution_failed_and_not_kept() {
    let dns = DnsServer::start().await;
    let resolver = DnsServiceResolver::with_name_servers(&[dns.addr]);
    let svc = service("kube-system", "missing", None);
    let err = resolver.resolve(&svc).await.unwrap_err();
    assert_eq!(
        err,
        ResolveError::NameResolutionFailed {
            namespace: "kube-system".into(),
            name: "missing".into(),
            host: "missing.kube-system.svc.cluster.local".into(),
            detail: "no such host".into(),
        }
    );
    assert_eq!(err.reason(), "FailedDiscoveryCheck");
    assert!(!err.is_unknown());
    assert_eq!(
        err.to_string(),
        "service/missing in \"kube-system\" cannot be resolved: lookup missing.kube-system.svc.cluster.local: no such host"
    );
    // The availability controller names the cause and the name.
    let cause = UnavailableCause::of_resolve_error(err, &svc, "/apis/metrics.k8s.io/v1beta1");
    assert_eq!(cause.name(), "NameResolutionFailed");
    assert_eq!(cause.reason(), "FailedDiscoveryCheck");
    let message = cause.to_string();
    assert!(
        message.contains("the name \"missing.kube-system.svc.cluster.local\" did not resolve"),
        "{message}"
    );
    assert!(
        message.contains(
            "https://missing.kube-system.svc.cluster.local:443/apis/metrics.k8s.io/v1beta1"
        ),
        "{message}"
    );
    // A failure is not kept: once the Service exists, it resolves.
    dns.set("missing.kube-system.svc.cluster.local.", [10, 96, 1, 1], 30);
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.96.1.1:443");
}

#[tokio::test]
async fn the_cluster_domain_is_configurable() {
    let dns = DnsServer::start().await;
    dns.set("api.team-a.svc.k8s.example.org.", [10, 1, 2, 3], 30);
    let resolver =
        DnsServiceResolver::with_name_servers(&[dns.addr]).cluster_domain(".k8s.example.org.");
    let svc = service("team-a", "api", Some(6443));
    assert_eq!(resolver.name_of(&svc), "api.team-a.svc.k8s.example.org.");
    assert_eq!(resolver.resolve(&svc).await.unwrap(), "10.1.2.3:6443");
}

#[tokio::test]
async fn a_dead_name_server_is_name_resolution_failed_with_what_happened() {
    // A bound socket that never answers: the lookup times out.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let resolver = DnsServiceResolver::with_name_servers(&[silent.local_addr().unwrap()])
        .timeout(Duration::from_millis(200));
    let err = resolver
        .resolve(&service("kube-system", "metrics-server", None))
        .await
        .unwrap_err();
    let ResolveError::NameResolutionFailed { host, detail, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(host, "metrics-server.kube-system.svc.cluster.local");
    assert!(
        detail.contains("timed out") || detail.contains("timeout"),
        "{detail}"
    );
}
