//! [`ApiServiceWatch`]: the APIServices of a cluster, as kube-aggregator's
//! `apiserviceInformer` sees them (kube-aggregator `pkg/apiserver/apiserver.go`).

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::source::{ApiServiceEvent, ApiServiceSource};

type Events = Pin<Box<dyn Stream<Item = Result<Event<APIService>, watcher::Error>> + Send>>;

/// The APIServices of the cluster behind `client`, as [`ApiServiceEvent`]s: a
/// [`Resynced`](ApiServiceEvent::Resynced) with the complete set after each list (at the
/// start, and again whenever the watch has to list anew: its `resourceVersion` expired
/// with 410 Gone, or the connection was lost), then
/// [`Applied`](ApiServiceEvent::Applied) and [`Deleted`](ApiServiceEvent::Deleted) as they
/// happen.
///
/// Built on `kube_runtime::watcher` (paginated list, then a watch with bookmarks from the
/// list's `resourceVersion`), with kube-runtime's default backoff after an error: the
/// source never ends while the client lives, and a lost watch costs a relist, never an
/// APIService. An object that does not decode as an APIService is logged and left out;
/// one that decodes but is invalid is refused by the registry with the reason, as a
/// manifest would be.
pub struct ApiServiceWatch {
    events: Events,
    /// The objects of a list in progress (between `Init` and `InitDone`).
    listing: Option<Vec<ApiService>>,
}

impl std::fmt::Debug for ApiServiceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServiceWatch")
            .field("listing", &self.listing.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl ApiServiceWatch {
    /// Every APIService of the cluster.
    pub fn new(client: Client) -> ApiServiceWatch {
        ApiServiceWatch::with_config(client, watcher::Config::default())
    }

    /// With the watcher's `config` (a label selector, the page size, the initial list
    /// strategy).
    pub fn with_config(client: Client, config: watcher::Config) -> ApiServiceWatch {
        let api: Api<APIService> = Api::all(client);
        ApiServiceWatch {
            events: watcher::watcher(api, config).default_backoff().boxed(),
            listing: None,
        }
    }

    /// What `event` means for the registry, if anything yet.
    fn on(&mut self, event: Event<APIService>) -> Option<ApiServiceEvent> {
        match event {
            Event::Init => {
                self.listing = Some(Vec::new());
                None
            }
            Event::InitApply(object) => {
                if let Some(apiservice) = convert(object) {
                    self.listing.get_or_insert_with(Vec::new).push(apiservice);
                }
                None
            }
            Event::InitDone => Some(ApiServiceEvent::Resynced(
                self.listing.take().unwrap_or_default(),
            )),
            Event::Apply(object) => convert(object).map(ApiServiceEvent::Applied),
            Event::Delete(object) => object.metadata.name.map(ApiServiceEvent::Deleted),
        }
    }
}

/// The object in the library's type: the same JSON, read by its own decoder.
fn convert(object: APIService) -> Option<ApiService> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let decoded = serde_json::to_value(&object).and_then(serde_json::from_value::<ApiService>);
    match decoded {
        Ok(apiservice) => Some(apiservice),
        Err(e) => {
            tracing::warn!(apiservice = %name, error = %e, "APIService left out: it does not decode");
            None
        }
    }
}

impl ApiServiceSource for ApiServiceWatch {
    async fn next_event(&mut self) -> Option<ApiServiceEvent> {
        loop {
            match self.events.next().await? {
                Ok(event) => {
                    if let Some(event) = self.on(event) {
                        return Some(event);
                    }
                }
                // The backoff waits before the watcher lists or watches again.
                Err(e) => tracing::warn!(error = %e, "APIService watch failed; it restarts"),
            }
        }
    }
}
