//! [`Tenants`]: the mounted tenants, each with its registry and managers, swapped in
//! whole on every change so the request path takes one lock-free load.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use futures_util::future::{AbortHandle, Abortable, BoxFuture};
use futures_util::stream::FuturesUnordered;

pub(crate) mod client;
mod event;
mod signal;

use client::{ClientCache, TenantTransport};
pub use event::{TenantApplyError, TenantError, TenantEvent, TenantSource, TenantSpec};
use signal::Bump;

use super::Scope;
use crate::apiservice::ApiService;
use crate::discovery::{DiscoveryConfig, DiscoveryManager};
use crate::openapi::{OpenApiConfig, OpenApiManager};
use crate::registry::{Registry, StatusSink};
use crate::resolver::ServiceResolver;
use crate::rt::Timer;
use crate::rt::lock;
use crate::source::ApiServiceEvent;
use crate::tenancy::{Changed, Signal, Tenant, TenantForwarding};
use crate::transport::Transport;

/// How every tenant of a [`Tenants`] is served. Defaults: [`TenantForwarding::Header`]
/// and upstream's discovery and OpenAPI timings.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TenantsConfig {
    /// How a tenant's requests reach its backends.
    pub forwarding: TenantForwarding,
    /// How each tenant's backends' discovery documents are fetched.
    pub discovery: DiscoveryConfig,
    /// How each tenant's backends' OpenAPI specs are fetched.
    pub openapi: OpenApiConfig,
}

impl TenantsConfig {
    /// The defaults with `forwarding`.
    pub fn new(forwarding: TenantForwarding) -> TenantsConfig {
        TenantsConfig {
            forwarding,
            ..TenantsConfig::default()
        }
    }
}

/// Receives every change of an `Available` condition of a tenant's APIService, as
/// [`StatusSink`] does for the stack's own.
pub trait TenantStatusSink: Send + Sync + 'static {
    /// `apiservice` of `tenant` carries the new status.
    fn status_changed(&self, tenant: &str, apiservice: &ApiService);
}

/// One mounted tenant: its name and its scope (registry, managers, caches).
pub(crate) struct Mounted {
    pub(crate) tenant: Tenant,
    pub(crate) scope: Scope,
    /// Its managers' abort handle once they run, and whether it was unmounted.
    managers: Mutex<Managers>,
}

#[derive(Default)]
struct Managers {
    abort: Option<AbortHandle>,
    stopped: bool,
}

type Mounts = HashMap<Arc<str>, Arc<Mounted>>;

struct Shared {
    mounted: ArcSwap<Mounts>,
    /// Serializes changes of `mounted` (never taken on the request path).
    writer: Mutex<()>,
    clients: Arc<ClientCache>,
    resolver: Arc<dyn ServiceResolver>,
    timer: Timer,
    config: TenantsConfig,
    signal: Arc<Signal>,
    sinks: Arc<Mutex<Vec<Arc<dyn TenantStatusSink>>>>,
}

/// The mounted tenants: a cloneable handle, shared by the aggregator (which routes by
/// it), the availability controller (which checks every tenant's APIServices) and the
/// host (which mounts and unmounts tenants with [`Tenants::apply`]).
///
/// Each tenant has a [`Registry`] of its own, built on the stack's transport through a
/// cache that hands every tenant the same client for the same backend target, and a
/// [`DiscoveryManager`] and [`OpenApiManager`] following it, which
/// [`Tenants::run_managers`] drives (the stack's [`Worker`](crate::Worker) does). All
/// tenants resolve Services with the stack's [`ServiceResolver`].
#[derive(Clone)]
pub struct Tenants {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Tenants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenants")
            .field("names", &self.names())
            .field("forwarding", &self.shared.config.forwarding)
            .finish_non_exhaustive()
    }
}

impl Tenants {
    /// No tenants yet; their backends are reached through `transport`, their Services
    /// resolved by `resolver`, their timestamps and fetches timed by `timer`.
    pub fn new(
        config: TenantsConfig,
        transport: impl Transport,
        resolver: impl ServiceResolver,
        timer: Timer,
    ) -> Tenants {
        let clients = Arc::new(ClientCache::new(Arc::new(transport)));
        Tenants::with_clients(config, clients, Arc::new(resolver), timer)
    }

    /// As [`Tenants::new`], taking clients from `clients` (shared with the stack's own
    /// registry).
    pub(crate) fn with_clients(
        config: TenantsConfig,
        clients: Arc<ClientCache>,
        resolver: Arc<dyn ServiceResolver>,
        timer: Timer,
    ) -> Tenants {
        Tenants {
            shared: Arc::new(Shared {
                mounted: ArcSwap::from_pointee(Mounts::new()),
                writer: Mutex::new(()),
                clients,
                resolver,
                timer,
                config,
                signal: Arc::default(),
                sinks: Arc::default(),
            }),
        }
    }

    /// How tenants' requests reach their backends.
    pub fn forwarding(&self) -> TenantForwarding {
        self.shared.config.forwarding
    }

    /// The mounted tenant `name`: one lock-free load.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Mounted>> {
        self.shared.mounted.load().get(name).cloned()
    }

    /// The registry of tenant `name` (its APIServices and their status; apply to it
    /// directly as to the stack's own), if mounted.
    pub fn registry(&self, name: &str) -> Option<Registry> {
        self.get(name).map(|m| m.scope.registry.clone())
    }

    /// The aggregated discovery manager of tenant `name`, if mounted.
    pub fn discovery(&self, name: &str) -> Option<DiscoveryManager> {
        self.get(name).and_then(|m| m.scope.discovery.clone())
    }

    /// The names of the mounted tenants, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .shared
            .mounted
            .load()
            .keys()
            .map(|k| k.to_string())
            .collect();
        names.sort_unstable();
        names
    }

    /// Every mounted tenant with its registry, in no particular order.
    pub fn registries(&self) -> Vec<(Tenant, Registry)> {
        self.shared
            .mounted
            .load()
            .values()
            .map(|m| (m.tenant.clone(), m.scope.registry.clone()))
            .collect()
    }

    /// Adds a sink that hears every status change of every tenant's APIServices, those
    /// mounted later included.
    pub fn add_status_sink(&self, sink: impl TenantStatusSink) {
        lock(&self.shared.sinks).push(Arc::new(sink));
    }

    /// Increases with every tenant mounted or unmounted and every table a tenant
    /// publishes.
    pub fn generation(&self) -> u64 {
        self.shared.signal.generation.load(Ordering::Acquire)
    }

    /// Completes once [`Tenants::generation`] is greater than `seen`.
    pub fn changed(&self, seen: u64) -> Changed {
        Changed {
            signal: self.shared.signal.clone(),
            seen,
        }
    }

    /// Applies one event. Every part that can be applied is: a tenant with an invalid
    /// name is skipped, a rejected APIService leaves the previous version of its name (as
    /// [`Registry::apply`]), and each is reported in the error.
    ///
    /// # Errors
    ///
    /// [`TenantApplyError`] listing what was not applied.
    pub fn apply(&self, event: TenantEvent) -> Result<(), TenantApplyError> {
        let mut errors = Vec::new();
        match event {
            TenantEvent::Applied(spec) => {
                let pending = self.mount(vec![spec], false, &mut errors);
                apply_all(pending, &mut errors);
            }
            TenantEvent::Resynced(specs) => {
                let pending = self.mount(specs, true, &mut errors);
                apply_all(pending, &mut errors);
            }
            TenantEvent::Deleted(name) => {
                let _writer = lock(&self.shared.writer);
                let current = self.shared.mounted.load_full();
                if current.contains_key(name.as_str()) {
                    let mut next = (*current).clone();
                    if let Some(gone) = next.remove(name.as_str()) {
                        gone.stop();
                    }
                    self.shared.mounted.store(Arc::new(next));
                    self.shared.signal.bump();
                }
            }
            TenantEvent::ApiService { tenant, event } => match self.get(&tenant) {
                Some(m) => {
                    if let Err(e) = m.scope.registry.apply(event) {
                        errors.push(TenantError::ApiServices { tenant, source: e });
                    }
                }
                None => errors.push(TenantError::NotMounted { tenant }),
            },
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(TenantApplyError { errors })
        }
    }

    /// Mounts the tenants of `specs` that are new (unmounting every other one when
    /// `resync`) in one swap, and returns each listed tenant's registry with the
    /// APIServices it is to get; those are applied after the writer is released, since
    /// a registry tells status sinks, which are the host's code.
    fn mount(
        &self,
        specs: Vec<TenantSpec>,
        resync: bool,
        errors: &mut Vec<TenantError>,
    ) -> Vec<(String, Registry, Vec<ApiService>)> {
        let _writer = lock(&self.shared.writer);
        let current = self.shared.mounted.load_full();
        let mut next: Mounts = if resync {
            Mounts::new()
        } else {
            (*current).clone()
        };
        let mut pending = Vec::new();
        let mut changed = false;
        for spec in specs {
            let tenant = match Tenant::new(&spec.name) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(e.into());
                    continue;
                }
            };
            let mounted = match current.get(tenant.name()) {
                Some(m) => m.clone(),
                None => {
                    changed = true;
                    self.new_tenant(tenant.clone())
                }
            };
            pending.push((spec.name, mounted.scope.registry.clone(), spec.apiservices));
            next.insert(tenant.shared_name().clone(), mounted);
        }
        for (name, gone) in current.iter() {
            if !next.contains_key(name) {
                gone.stop();
                changed = true;
            }
        }
        if changed {
            self.shared.mounted.store(Arc::new(next));
            self.shared.signal.bump();
        }
        pending
    }

    /// A new tenant: its registry on the shared transport, clock and sinks, and its
    /// managers following it.
    fn new_tenant(&self, tenant: Tenant) -> Arc<Mounted> {
        let shared = &self.shared;
        let registry = Registry::new(TenantTransport {
            tenant: tenant.clone(),
            forwarding: shared.config.forwarding,
            cache: shared.clients.clone(),
        });
        registry.set_clock(shared.timer.clone());
        registry.add_status_sink(ForwardStatus {
            tenant: tenant.clone(),
            sinks: shared.sinks.clone(),
        });
        registry.add_observer(Bump(shared.signal.clone()));
        let discovery =
            DiscoveryManager::new(shared.timer.clone(), shared.config.discovery.clone());
        let openapi = OpenApiManager::new(shared.timer.clone(), shared.config.openapi.clone());
        registry.feed(shared.resolver.clone(), discovery.clone());
        registry.feed(shared.resolver.clone(), openapi.clone());
        Arc::new(Mounted {
            tenant,
            scope: Scope::new(registry, Some(discovery), Some(openapi)),
            managers: Mutex::default(),
        })
    }

    /// [`Tenants::apply`], logging what could not be applied.
    pub(crate) fn apply_logged(&self, event: TenantEvent) {
        if let Err(e) = self.apply(event) {
            for e in &e.errors {
                tracing::warn!(error = %e, "tenant change not applied");
            }
        }
    }

    /// Applies every event of `source` until it ends, logging what could not be applied.
    pub async fn run<S: TenantSource>(self, mut source: S) {
        while let Some(event) = source.next_event().await {
            self.apply_logged(event);
        }
    }

    /// Runs forever: the discovery and OpenAPI managers of every mounted tenant, each
    /// started when its tenant is mounted and stopped when it is unmounted. The stack's
    /// [`Worker`](crate::Worker) runs this; a host assembling the layers by hand spawns
    /// it.
    pub async fn run_managers(self) {
        let mut running: FuturesUnordered<Abortable<BoxFuture<'static, ()>>> =
            FuturesUnordered::new();
        loop {
            let seen = self.generation();
            for mounted in self.shared.mounted.load().values() {
                let mut managers = lock(&mounted.managers);
                if managers.abort.is_some() || managers.stopped {
                    continue;
                }
                let (abort, registration) = AbortHandle::new_pair();
                let scope = &mounted.scope;
                let (discovery, openapi) = (scope.discovery.clone(), scope.openapi.clone());
                let work: BoxFuture<'static, ()> = Box::pin(async move {
                    let discovery = async move {
                        if let Some(d) = discovery {
                            d.run().await;
                        }
                    };
                    let openapi = async move {
                        if let Some(o) = openapi {
                            o.run().await;
                        }
                    };
                    futures_util::future::join(discovery, openapi).await;
                });
                running.push(Abortable::new(work, registration));
                managers.abort = Some(abort);
            }
            let mut changed = self.changed(seen);
            // Managers never finish; an aborted one is dropped here.
            std::future::poll_fn(|cx| {
                while let Poll::Ready(Some(_)) = running.poll_next_unpin(cx) {}
                Pin::new(&mut changed).poll(cx)
            })
            .await;
        }
    }
}

fn apply_all(pending: Vec<(String, Registry, Vec<ApiService>)>, errors: &mut Vec<TenantError>) {
    for (tenant, registry, apiservices) in pending {
        if let Err(e) = registry.apply(ApiServiceEvent::Resynced(apiservices)) {
            errors.push(TenantError::ApiServices { tenant, source: e });
        }
    }
}

impl crate::availability::MountedTenants for Tenants {
    fn registries(&self) -> Vec<(Tenant, Registry)> {
        Tenants::registries(self)
    }

    fn generation(&self) -> u64 {
        Tenants::generation(self)
    }

    fn changed(&self, seen: u64) -> Changed {
        Tenants::changed(self, seen)
    }
}

impl Mounted {
    /// Stops the tenant's managers (unmounted).
    fn stop(&self) {
        let mut managers = lock(&self.managers);
        managers.stopped = true;
        if let Some(abort) = managers.abort.take() {
            abort.abort();
        }
    }
}

/// Tells the tenants' status sinks about one tenant's changes.
struct ForwardStatus {
    tenant: Tenant,
    sinks: Arc<Mutex<Vec<Arc<dyn TenantStatusSink>>>>,
}

impl StatusSink for ForwardStatus {
    fn status_changed(&self, apiservice: &ApiService) {
        let sinks: Vec<Arc<dyn TenantStatusSink>> = lock(&self.sinks).clone();
        for sink in sinks {
            sink.status_changed(self.tenant.name(), apiservice);
        }
    }
}
