//! [`DnsServiceResolver`]: a Service's address from the cluster's DNS.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use fnv::FnvHashMap;
use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{Resolver, TokioResolver};
use http::uri::Authority;

use super::{EndpointsFuture, ResolveError, ResolveFuture, ServiceEndpoints, ServiceResolver};
use crate::apiservice::ServiceReference;

/// The cluster domain kubelet and CoreDNS use unless told otherwise
/// (`--cluster-domain`).
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Resolves `spec.service` through DNS: `<name>.<namespace>.svc.<cluster domain>.`, the
/// name the cluster's DNS (CoreDNS, kube-dns) serves for a Service. For a Service with a
/// ClusterIP that is the ClusterIP, which is where upstream's default resolver routes
/// (kube-aggregator `pkg/apiserver/resolvers.go`, `NewClusterIPServiceResolver`); the
/// address returned is that IP with the APIService's port. The name is asked fully
/// qualified, so `resolv.conf`'s search list and `ndots` play no part.
///
/// Each answer is kept for its TTL (the shortest of its records'): requests within it are
/// answered from memory, without a lookup, and the first one after it asks again. A failed
/// lookup is not kept here (hickory's cache still honours a negative answer's SOA TTL, as
/// any resolver does); it is [`ResolveError::NameResolutionFailed`] with the name, which
/// the availability controller reports as the cause `NameResolutionFailed`.
///
/// When a name has several addresses (a headless Service), the first one is used; a
/// resolver that spreads requests over a Service's endpoints needs them from the
/// Kubernetes API.
///
/// ```no_run
/// use kube_aggregator::availability::DnsServiceResolver;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // The name servers and options of /etc/resolv.conf, the default cluster domain.
/// let resolver = DnsServiceResolver::system()?;
/// // Or fixed name servers, and the cluster's domain.
/// let resolver = DnsServiceResolver::with_name_servers(&["10.96.0.10:53".parse()?])
///     .cluster_domain("k8s.example.com");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DnsServiceResolver {
    resolver: TokioResolver,
    cluster_domain: Arc<str>,
    answers: Arc<RwLock<Answers>>,
}

/// Namespace, then name, then port: looked up by `&str`, without building a key.
type Answers = FnvHashMap<String, FnvHashMap<String, FnvHashMap<i32, Answer>>>;

/// A lookup's address with the port asked for, and when it is to be asked again.
#[derive(Debug, Clone)]
struct Answer {
    authority: Authority,
    valid_until: Instant,
}

impl std::fmt::Debug for DnsServiceResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServiceResolver")
            .field("cluster_domain", &self.cluster_domain)
            .field("name_servers", &self.resolver.config().name_servers())
            .finish_non_exhaustive()
    }
}

/// The system's DNS configuration could not be read (`/etc/resolv.conf` missing or not
/// parseable); the source says what failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the system's DNS configuration: {0}")]
pub struct DnsConfigError(#[source] hickory_resolver::ResolveError);

impl DnsServiceResolver {
    /// Asks the name servers of the system's configuration (`/etc/resolv.conf`), with its
    /// options (timeout, attempts), inside the cluster domain `cluster.local`.
    ///
    /// # Errors
    ///
    /// [`DnsConfigError`] when the configuration cannot be read.
    pub fn system() -> Result<DnsServiceResolver, DnsConfigError> {
        let builder = TokioResolver::builder_tokio().map_err(DnsConfigError)?;
        Ok(DnsServiceResolver::from_resolver(builder.build()))
    }

    /// Asks `name_servers` (over UDP, then TCP for a truncated answer), with hickory's
    /// default options (5 s timeout, 2 attempts), inside the cluster domain
    /// `cluster.local`.
    pub fn with_name_servers(name_servers: &[SocketAddr]) -> DnsServiceResolver {
        let mut group = NameServerConfigGroup::new();
        for addr in name_servers {
            group.merge(NameServerConfigGroup::from_ips_clear(
                &[addr.ip()],
                addr.port(),
                true,
            ));
        }
        let config = ResolverConfig::from_parts(None, Vec::new(), group);
        let mut options = ResolverOpts::default();
        // The hosts file answers for names that are not the cluster's: keep it out.
        options.use_hosts_file = hickory_resolver::config::ResolveHosts::Never;
        let resolver = Resolver::builder_with_config(config, TokioConnectionProvider::default())
            .with_options(options)
            .build();
        DnsServiceResolver::from_resolver(resolver)
    }

    fn from_resolver(resolver: TokioResolver) -> DnsServiceResolver {
        DnsServiceResolver {
            resolver,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.into(),
            answers: Arc::default(),
        }
    }

    /// The cluster domain Service names end in (default [`DEFAULT_CLUSTER_DOMAIN`]); a
    /// leading or trailing dot is ignored. Answers kept so far are forgotten.
    pub fn cluster_domain(self, domain: &str) -> DnsServiceResolver {
        DnsServiceResolver {
            cluster_domain: domain.trim_matches('.').into(),
            answers: Arc::default(),
            ..self
        }
    }

    /// How long one query waits for its answer before it is asked again (at most
    /// resolv.conf's `attempts` times, 2 by default); default resolv.conf's `timeout`, or
    /// 5 s. Answers kept so far are forgotten.
    pub fn timeout(self, timeout: Duration) -> DnsServiceResolver {
        let mut options = self.resolver.options().clone();
        options.timeout = timeout;
        let resolver = Resolver::builder_with_config(
            self.resolver.config().clone(),
            TokioConnectionProvider::default(),
        )
        .with_options(options)
        .build();
        DnsServiceResolver {
            resolver,
            answers: Arc::default(),
            ..self
        }
    }

    /// The name asked for `service`: `<name>.<namespace>.svc.<cluster domain>.`.
    pub fn name_of(&self, service: &ServiceReference) -> String {
        format!(
            "{}.{}.svc.{}.",
            service.name, service.namespace, self.cluster_domain
        )
    }

    /// The kept answer for `service` at `port`, if it is still valid at `now`.
    fn kept(&self, service: &ServiceReference, port: i32, now: Instant) -> Option<Authority> {
        let answers = self.answers.read().unwrap_or_else(|e| e.into_inner());
        let answer = answers
            .get(service.namespace.as_str())?
            .get(service.name.as_str())?
            .get(&port)?;
        (now < answer.valid_until).then(|| answer.authority.clone())
    }

    fn keep(&self, service: &ServiceReference, port: i32, answer: Answer) {
        let mut answers = self.answers.write().unwrap_or_else(|e| e.into_inner());
        answers
            .entry(service.namespace.clone())
            .or_default()
            .entry(service.name.clone())
            .or_default()
            .insert(port, answer);
    }

    /// Asks the name servers for `service`'s address, and keeps the answer.
    async fn look_up(
        &self,
        service: ServiceReference,
        port: i32,
    ) -> Result<Authority, ResolveError> {
        let host = self.name_of(&service);
        let failed = |detail: String| ResolveError::NameResolutionFailed {
            namespace: service.namespace.clone(),
            name: service.name.clone(),
            host: host.trim_end_matches('.').to_owned(),
            detail,
        };
        let lookup = match self.resolver.lookup_ip(host.as_str()).await {
            Ok(lookup) => lookup,
            // Go's resolver says "no such host" for NXDOMAIN and for a name without
            // addresses alike.
            Err(e) if e.is_nx_domain() || e.is_no_records_found() => {
                return Err(failed("no such host".to_owned()));
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        let Some(ip) = lookup.iter().next() else {
            return Err(failed("no such host".to_owned()));
        };
        let authority = authority(ip, port).map_err(failed)?;
        self.keep(
            &service,
            port,
            Answer {
                authority: authority.clone(),
                valid_until: lookup.valid_until(),
            },
        );
        Ok(authority)
    }
}

/// `ip:port`, IPv6 in brackets.
fn authority(ip: IpAddr, port: i32) -> Result<Authority, String> {
    let port = u16::try_from(port).map_err(|_| format!("port {port} is out of range"))?;
    Authority::try_from(SocketAddr::new(ip, port).to_string()).map_err(|e| e.to_string())
}

impl ServiceResolver for DnsServiceResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        let port = service.port_or_default();
        if let Some(authority) = self.kept(service, port, Instant::now()) {
            return Box::pin(std::future::ready(Ok(authority)));
        }
        let this = self.clone();
        let service = service.clone();
        Box::pin(async move { this.look_up(service, port).await })
    }

    fn resolve_endpoints(&self, service: &ServiceReference) -> EndpointsFuture {
        let port = service.port_or_default();
        if let Some(authority) = self.kept(service, port, Instant::now()) {
            return Box::pin(std::future::ready(Ok(ServiceEndpoints::One(authority))));
        }
        let this = self.clone();
        let service = service.clone();
        Box::pin(async move { this.look_up(service, port).await.map(ServiceEndpoints::One) })
    }
}

#[cfg(test)]
mod tests;
