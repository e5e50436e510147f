//! The storage: objects by key, one resourceVersion counter for every write, a bounded
//! history of events for watches and consistent lists, and an optional JSON file.
//!
//! It plays the part etcd and the watch cache play for kube-apiserver
//! (apiserver `pkg/storage/etcd3/store.go`, `pkg/storage/cacher/watch_cache*.go`): every
//! write gets the next resourceVersion (one counter across both kinds, as etcd's
//! revision); list order is key order (namespace, then name); a watch from resourceVersion
//! `N` gets every event after `N` while the history still holds it, and a list or
//! continue token at `N` is served by undoing the events after `N`. Older than the
//! history gives 410 `Expired`. With a file, the objects and the counter survive a
//! restart (the history does not, so a watch from before the restart gets 410, as after
//! an etcd compaction).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

/// Where an object lives: its resource, namespace (empty when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The plural resource.
    pub resource: String,
    /// The namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// The name.
    pub name: String,
}

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion it was committed at.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// To which object.
    pub key: Key,
    /// The object after the write (for `DELETED`, the object as deleted, carrying the
    /// deletion's resourceVersion, as etcd3's watcher reports it).
    pub object: Value,
    /// The object before the write (`MODIFIED`, `DELETED`).
    pub prev: Option<Value>,
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Create of an existing key.
    AlreadyExists,
    /// Update or delete of a missing key.
    NotFound,
    /// The object changed since the resourceVersion the write was based on.
    Conflict,
}

/// What a watch starts from: the initial events, the resourceVersion they bring the
/// watcher to, and the feed of later events.
pub type Watching = (Vec<Arc<Event>>, u64, broadcast::Receiver<Arc<Event>>);

/// Why a read at a resourceVersion cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Older than the history: `(asked, oldest servable)`.
    TooOld(u64, u64),
    /// Newer than the store: `(asked, current)`.
    TooNew(u64, u64),
}

/// How many events the history keeps (the watch cache's default capacity is 100, growing
/// to 100k; etcd keeps five minutes).
pub const HISTORY: usize = 1000;

#[derive(Debug)]
struct State {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Every event after this resourceVersion is in `history`.
    floor: u64,
}

/// The shared store.
#[derive(Debug, Clone)]
pub struct Store {
    state: Arc<Mutex<State>>,
    events: broadcast::Sender<Arc<Event>>,
    file: Option<PathBuf>,
}

impl Store {
    /// An empty store, or the one saved in `file` (created on the first write).
    /// Errors: a file that exists but cannot be read or parsed.
    pub fn open(file: Option<PathBuf>) -> Result<Store, String> {
        let mut state = State {
            objects: BTreeMap::new(),
            rv: 0,
            history: VecDeque::new(),
            floor: 0,
        };
        if let Some(path) = file.as_ref().filter(|p| p.exists()) {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let saved: Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            state.rv = saved["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            for o in saved["objects"].as_array().into_iter().flatten() {
                let key = Key {
                    resource: o["resource"].as_str().unwrap_or_default().to_owned(),
                    namespace: o["object"]["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    name: o["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                };
                state.objects.insert(key, o["object"].clone());
            }
            state.floor = state.rv;
        }
        let (events, _) = broadcast::channel(HISTORY);
        Ok(Store {
            state: Arc::new(Mutex::new(state)),
            events,
            file,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current resourceVersion (of the last write).
    pub fn current(&self) -> u64 {
        self.lock().rv
    }

    /// The object at `key`.
    pub fn get(&self, key: &Key) -> Option<Value> {
        self.lock().objects.get(key).cloned()
    }

    /// The objects of `resource` (in `namespace`, or all when `None`) at resourceVersion
    /// `at` (now when `None`), in key order, and the resourceVersion listed at.
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        at: Option<u64>,
    ) -> Result<(Vec<(Key, Value)>, u64), ReadError> {
        let state = self.lock();
        let in_scope =
            |k: &Key| k.resource == resource && namespace.is_none_or(|ns| k.namespace == ns);
        let mut objects: BTreeMap<Key, Value> = state
            .objects
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let Some(at) = at.filter(|at| *at != state.rv) else {
            return Ok((objects.into_iter().collect(), state.rv));
        };
        if at > state.rv {
            return Err(ReadError::TooNew(at, state.rv));
        }
        if at < state.floor {
            return Err(ReadError::TooOld(at, state.floor));
        }
        // Undo the events after `at`, newest first.
        for e in state
            .history
            .iter()
            .rev()
            .take_while(|e| e.rv > at)
            .filter(|e| in_scope(&e.key))
        {
            match (&e.kind, &e.prev) {
                (EventType::Added, _) => {
                    objects.remove(&e.key);
                }
                (_, Some(prev)) => {
                    objects.insert(e.key.clone(), prev.clone());
                }
                (_, None) => {}
            }
        }
        Ok((objects.into_iter().collect(), at))
    }

    /// What a watch from resourceVersion `from` starts with: the events after it (or, with
    /// `None`, the current objects of `resource` as `ADDED`), the resourceVersion it is
    /// at, and the feed of later events. Taken under the write lock, so nothing is missed
    /// or repeated between the two.
    pub fn watch(&self, resource: &str, from: Option<u64>) -> Result<Watching, ReadError> {
        let state = self.lock();
        let feed = self.events.subscribe();
        let initial = match from {
            None => state
                .objects
                .iter()
                .filter(|(k, _)| k.resource == resource)
                .map(|(k, v)| {
                    let rv = v["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    Arc::new(Event {
                        rv,
                        kind: EventType::Added,
                        key: k.clone(),
                        object: v.clone(),
                        prev: None,
                    })
                })
                .collect(),
            Some(from) if from > state.rv => return Err(ReadError::TooNew(from, state.rv)),
            Some(from) if from < state.floor => return Err(ReadError::TooOld(from, state.floor)),
            Some(from) => state
                .history
                .iter()
                .filter(|e| e.rv > from)
                .cloned()
                .collect(),
        };
        Ok((initial, state.rv, feed))
    }

    /// Commits a write decided by `decide`, which sees the current object at `key` and
    /// returns the new one (`None` deletes) or refuses. The new object gets the next
    /// resourceVersion. Returns the committed event, or `None` when `decide` left the
    /// object as it was (no write, as etcd3's GuaranteedUpdate skips an unchanged one).
    pub fn write<E>(
        &self,
        key: &Key,
        decide: impl FnOnce(Option<&Value>) -> Result<Option<Value>, E>,
    ) -> Result<Option<Arc<Event>>, E> {
        let mut state = self.lock();
        let current = state.objects.get(key).cloned();
        let next = decide(current.as_ref())?;
        let kind = match (&current, &next) {
            (None, None) => return Ok(None),
            (Some(old), Some(new)) if without_rv(old) == without_rv(new) => return Ok(None),
            (None, Some(_)) => EventType::Added,
            (Some(_), Some(_)) => EventType::Modified,
            (Some(_), None) => EventType::Deleted,
        };
        state.rv += 1;
        let rv = state.rv;
        let mut object = next
            .clone()
            .or_else(|| current.clone())
            .unwrap_or(Value::Null);
        object["metadata"]["resourceVersion"] = rv.to_string().into();
        match kind {
            EventType::Deleted => {
                state.objects.remove(key);
            }
            _ => {
                state.objects.insert(key.clone(), object.clone());
            }
        }
        let event = Arc::new(Event {
            rv,
            kind,
            key: key.clone(),
            object,
            prev: current,
        });
        state.history.push_back(event.clone());
        if state.history.len() > HISTORY {
            if let Some(gone) = state.history.pop_front() {
                state.floor = gone.rv;
            }
        }
        self.save(&state);
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(event.clone());
        Ok(Some(event))
    }

    /// Writes the objects and the counter to the file, through a temporary file and a
    /// rename so a crash leaves the old or the new file, never half of one.
    fn save(&self, state: &State) {
        let Some(path) = &self.file else { return };
        let objects: Vec<Value> = state
            .objects
            .iter()
            .map(|(k, v)| json!({"resource": k.resource, "object": v}))
            .collect();
        let doc = json!({"resourceVersion": state.rv.to_string(), "objects": objects});
        let tmp = path.with_extension("tmp");
        let written = serde_json::to_vec_pretty(&doc)
            .map_err(|e| e.to_string())
            .and_then(|bytes| std::fs::write(&tmp, bytes).map_err(|e| e.to_string()))
            .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| e.to_string()));
        if let Err(e) = written {
            tracing::error!(file = %path.display(), error = %e, "cannot save the store");
        }
    }
}

fn without_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}
