//! How a tenant's requests reach its backends: the stack's transport behind a cache that
//! gives every tenant the same client (and so the same connection pool) for the same
//! backend, and a thin wrapper that writes the tenant into each request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use http::uri::PathAndQuery;
use http::{HeaderName, HeaderValue, Request, Uri};
use tower::Service;
use tower::util::{BoxCloneSyncService, Oneshot, ServiceExt};

use crate::body::{Body, BoxError};
use crate::tenancy::{CLUSTERS_PREFIX, TENANT_HEADER, Tenant, TenantForwarding};
use crate::transport::{BackendClient, BackendTarget, Transport, TransportError};

/// The stack's transport, with the clients it built shared by every tenant that reaches
/// the same target (server name, caBundle, insecure flag): a backend serving many tenants
/// keeps one pool of connections. A client lives while any tenant's APIService holds it.
pub(crate) struct ClientCache {
    transport: Arc<dyn Transport>,
    clients: Mutex<HashMap<(BackendTarget, bool), Weak<BackendClient>>>,
}

impl ClientCache {
    pub(crate) fn new(transport: Arc<dyn Transport>) -> ClientCache {
        ClientCache {
            transport,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The shared client for `target` (the upgrade client when `upgrade`).
    pub(crate) fn get(
        &self,
        target: &BackendTarget,
        upgrade: bool,
    ) -> Result<Arc<BackendClient>, TransportError> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (target.clone(), upgrade);
        if let Some(client) = clients.get(&key).and_then(Weak::upgrade) {
            return Ok(client);
        }
        let client = Arc::new(if upgrade {
            self.transport.upgrade_client(target)?
        } else {
            self.transport.client(target)?
        });
        // Clients of targets nobody uses any more are forgotten as new ones arrive.
        clients.retain(|_, c| c.strong_count() > 0);
        clients.insert(key, Arc::downgrade(&client));
        Ok(client)
    }
}

/// The [`Transport`] of the stack's own registry when tenants are mounted: the cache's
/// clients as they are.
pub(crate) struct CachedTransport(pub(crate) Arc<ClientCache>);

impl Transport for CachedTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Ok(BoxCloneSyncService::new(Shared(self.0.get(target, false)?)))
    }

    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Ok(BoxCloneSyncService::new(Shared(self.0.get(target, true)?)))
    }
}

/// A client of the cache, kept alive by whoever holds it.
#[derive(Clone)]
struct Shared(Arc<BackendClient>);

impl Service<Request<Body>> for Shared {
    // Always ready: each call takes a fresh clone of the shared client.
    crate::body::answers!(BoxError, Oneshot<BackendClient, Request<Body>>);

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        (*self.0).clone().oneshot(req)
    }
}

/// The [`Transport`] of one tenant's registry.
pub(crate) struct TenantTransport {
    pub(crate) tenant: Tenant,
    pub(crate) forwarding: TenantForwarding,
    pub(crate) cache: Arc<ClientCache>,
}

impl TenantTransport {
    fn wrap(&self, inner: Arc<BackendClient>) -> BackendClient {
        // A tenant name holds no `/` and nothing to escape: `/clusters/<name>` is a path.
        let prefix = match self.forwarding {
            TenantForwarding::PathPrefix => Some(Arc::from(format!(
                "{CLUSTERS_PREFIX}{}",
                self.tenant.name()
            ))),
            TenantForwarding::Header => None,
        };
        let header = HeaderValue::from_str(self.tenant.name()).ok();
        BoxCloneSyncService::new(TenantClient {
            inner,
            forwarding: self.forwarding,
            header,
            prefix,
        })
    }
}

impl Transport for TenantTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Ok(self.wrap(self.cache.get(target, false)?))
    }

    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Ok(self.wrap(self.cache.get(target, true)?))
    }
}

const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");

/// Writes the tenant into each request, then sends it through the shared client.
#[derive(Clone)]
struct TenantClient {
    inner: Arc<BackendClient>,
    forwarding: TenantForwarding,
    /// The tenant's name as a header value.
    header: Option<HeaderValue>,
    /// `/clusters/<name>`, for [`TenantForwarding::PathPrefix`].
    prefix: Option<Arc<str>>,
}

impl Service<Request<Body>> for TenantClient {
    // Always ready: each call takes a fresh clone of the shared client.
    crate::body::answers!(BoxError, Oneshot<BackendClient, Request<Body>>);

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        match (self.forwarding, &self.prefix) {
            (TenantForwarding::PathPrefix, Some(prefix)) => {
                if let Some(uri) = prefixed(req.uri(), prefix) {
                    *req.uri_mut() = uri;
                }
                let forwarded = req.headers().get(X_FORWARDED_URI);
                let forwarded = forwarded.and_then(|v| v.to_str().ok());
                if let Some(v) =
                    forwarded.and_then(|v| HeaderValue::from_str(&format!("{prefix}{v}")).ok())
                {
                    req.headers_mut().insert(X_FORWARDED_URI, v);
                }
                // Whatever came with the request, the backend reads the tenant from the
                // path alone.
                req.headers_mut().remove(TENANT_HEADER);
            }
            _ => match &self.header {
                Some(v) => {
                    req.headers_mut().insert(TENANT_HEADER, v.clone());
                }
                None => {
                    req.headers_mut().remove(TENANT_HEADER);
                }
            },
        }
        (*self.inner).clone().oneshot(req)
    }
}

/// `uri` with `prefix` in front of its path.
fn prefixed(uri: &Uri, prefix: &str) -> Option<Uri> {
    let pq = uri.path_and_query().map_or("/", PathAndQuery::as_str);
    let pq = PathAndQuery::try_from(format!("{prefix}{pq}")).ok()?;
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(pq);
    Uri::from_parts(parts).ok()
}
