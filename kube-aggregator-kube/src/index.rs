//! [`Cache`]: what a watch of one kind keeps, filed under the Service each object
//! belongs to, as an informer's indexed store.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, RwLock};

use futures_util::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// One object as the cache keeps it: where it is filed, and what of it is kept.
pub(crate) struct Entry<V> {
    pub(crate) service: String,
    pub(crate) value: V,
}

/// Namespace, then Service name, then the object's own name.
type ByService<V> = HashMap<String, HashMap<String, HashMap<String, V>>>;

/// The objects of one kind by namespace and Service, and the Service each object is
/// filed under (an object whose Service changes moves).
struct Index<V> {
    by_service: ByService<V>,
    owner: HashMap<(String, String), String>,
}

impl<V> Default for Index<V> {
    fn default() -> Self {
        Index {
            by_service: HashMap::new(),
            owner: HashMap::new(),
        }
    }
}

impl<V> Index<V> {
    fn insert(&mut self, namespace: String, name: String, entry: Entry<V>) {
        self.remove(&namespace, &name);
        self.owner
            .insert((namespace.clone(), name.clone()), entry.service.clone());
        self.by_service
            .entry(namespace)
            .or_default()
            .entry(entry.service)
            .or_default()
            .insert(name, entry.value);
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let Some(service) = self.owner.remove(&(namespace.to_owned(), name.to_owned())) else {
            return;
        };
        let Some(services) = self.by_service.get_mut(namespace) else {
            return;
        };
        if let Some(objects) = services.get_mut(&service) {
            objects.remove(name);
            if objects.is_empty() {
                services.remove(&service);
            }
        }
        if services.is_empty() {
            self.by_service.remove(namespace);
        }
    }
}

/// The objects of one kind, from a watch of every namespace, filed by Service; updated by
/// the watch as it goes (a relist replaces the whole set at once), never by a request.
pub(crate) struct Cache<V> {
    index: Arc<RwLock<Index<V>>>,
    ready: watch::Receiver<bool>,
    task: Arc<AbortOnDrop>,
}

impl<V> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Cache {
            index: self.index.clone(),
            ready: self.ready.clone(),
            task: self.task.clone(),
        }
    }
}

impl<V> Debug for Cache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("ready", &*self.ready.borrow())
            .finish_non_exhaustive()
    }
}

/// The watch's task, stopped when the last clone of its cache is dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<V: Send + Sync + 'static> Cache<V> {
    /// Watches `api` (kube-runtime's watcher and its default backoff) on a task of the
    /// current tokio runtime, keeping `entry` of each object; an object for which it is
    /// `None` is not kept.
    pub(crate) fn spawn<K>(api: Api<K>, entry: fn(&K) -> Option<Entry<V>>) -> Cache<V>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        K::DynamicType: Default,
    {
        let index: Arc<RwLock<Index<V>>> = Arc::default();
        let (ready_tx, ready) = watch::channel(false);
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let fed = index.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listing: Option<Index<V>> = None;
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::warn!(kind = %kind, error = %e, "watch failed; it restarts");
                        continue;
                    }
                };
                match event {
                    Event::Init => listing = Some(Index::default()),
                    Event::InitApply(object) => {
                        let listing = listing.get_or_insert_with(Index::default);
                        file(listing, &object, entry);
                    }
                    Event::InitDone => {
                        let listed = listing.take().unwrap_or_default();
                        *fed.write().unwrap_or_else(|e| e.into_inner()) = listed;
                        ready_tx.send_replace(true);
                    }
                    Event::Apply(object) => {
                        let mut index = fed.write().unwrap_or_else(|e| e.into_inner());
                        file(&mut index, &object, entry);
                    }
                    Event::Delete(object) => {
                        let mut index = fed.write().unwrap_or_else(|e| e.into_inner());
                        index.remove(&object.namespace().unwrap_or_default(), &object.name_any());
                    }
                }
            }
        });
        Cache {
            index,
            ready,
            task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// Whether the first list has been applied.
    pub(crate) fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits for the first list (returns at once after it).
    pub(crate) async fn ready(&self) {
        let mut ready = self.ready.clone();
        // An error means the task ended; there is nothing more to wait for.
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Calls `f` with the objects filed under Service `namespace/service` (none: empty).
    pub(crate) fn with<T>(
        &self,
        namespace: &str,
        service: &str,
        f: impl FnOnce(Option<&HashMap<String, V>>) -> T,
    ) -> T {
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        f(index
            .by_service
            .get(namespace)
            .and_then(|services| services.get(service)))
    }
}

/// Files `object` in `index` (or takes it out, when it is not to be kept).
fn file<K: Resource, V>(index: &mut Index<V>, object: &K, entry: fn(&K) -> Option<Entry<V>>) {
    let namespace = object.meta().namespace.clone().unwrap_or_default();
    let name = object.meta().name.clone().unwrap_or_default();
    match entry(object) {
        Some(entry) => index.insert(namespace, name, entry),
        None => index.remove(&namespace, &name),
    }
}
