//! How the discovery and OpenAPI managers follow the registry: each published table as
//! plain [`TargetSet`] data, with a [`Fetcher`] per remote APIService.

use std::sync::Arc;

use http::uri::{PathAndQuery, Scheme};
use http::{Request, Uri};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use super::{RoutingTable, TableObserver};
use crate::apiservice::ServiceReference;
use crate::discovery::{Fetcher, LocalVersion, ServiceKey, Target, TargetSet, TargetSink};
use crate::resolver::ServiceResolver;
use crate::transport::{BackendClient, TransportError};

/// [`Registry::feed`]'s observer.
pub(super) struct Feed<S> {
    pub(super) resolver: Arc<dyn ServiceResolver>,
    pub(super) sink: S,
}

impl<S: TargetSink> TableObserver for Feed<S> {
    fn table_published(&self, table: &Arc<RoutingTable>) {
        self.sink.sync(&table.targets(&self.resolver));
    }
}

impl RoutingTable {
    /// The APIServices as the discovery and OpenAPI managers see them: remote ones with a
    /// [`Fetcher`] over their backend client (those whose transport could not be built
    /// get a fetcher that fails with the transport error), local ones with their
    /// priorities.
    ///
    /// Each fetcher resolves the Service afresh per request with `resolver` (so endpoint
    /// changes apply) and sends `https://<resolved>/<path>` with the headers the caller
    /// set; it does not pass the availability gate, as upstream's discovery fetches reach
    /// backends whose condition is not `True`. The set carries this table's generation.
    pub fn targets(&self, resolver: &Arc<dyn ServiceResolver>) -> TargetSet {
        let mut set = TargetSet {
            generation: self.generation,
            ..TargetSet::default()
        };
        for route in self.routes_unordered() {
            let spec = &route.apiservice.spec;
            let Some(remote) = route.remote() else {
                set.local.push(LocalVersion {
                    group: spec.group.clone(),
                    version: spec.version.clone(),
                    group_priority_minimum: spec.group_priority_minimum,
                    version_priority: spec.version_priority,
                });
                continue;
            };
            set.remote.push(Target {
                name: route.apiservice.name().to_owned(),
                group: spec.group.clone(),
                version: spec.version.clone(),
                group_priority_minimum: spec.group_priority_minimum,
                version_priority: spec.version_priority,
                service: ServiceKey {
                    namespace: remote.service.namespace.clone(),
                    name: remote.service.name.clone(),
                    port: remote.service.port_or_default(),
                },
                available: route.is_available(),
                fetcher: fetcher(
                    remote.client.clone(),
                    resolver.clone(),
                    remote.service.clone(),
                ),
            });
        }
        set
    }
}

/// A [`Fetcher`] that resolves `service` and sends through `client`. Errors: the
/// transport error when no client could be built, the resolver's error, or the client's.
fn fetcher(
    client: Result<BackendClient, TransportError>,
    resolver: Arc<dyn ServiceResolver>,
    service: ServiceReference,
) -> Fetcher {
    BoxCloneSyncService::new(tower::service_fn(
        move |mut req: Request<crate::body::Body>| {
            let (client, resolver, service) = (client.clone(), resolver.clone(), service.clone());
            async move {
                let client = client?;
                let authority = resolver.resolve(&service).await?;
                let pq = req
                    .uri()
                    .path_and_query()
                    .cloned()
                    .unwrap_or_else(|| PathAndQuery::from_static("/"));
                *req.uri_mut() = Uri::builder()
                    .scheme(Scheme::HTTPS)
                    .authority(authority)
                    .path_and_query(pq)
                    .build()?;
                client.oneshot(req).await
            }
        },
    ))
}
