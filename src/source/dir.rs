//! A source over a directory of manifests: `*.yaml`, `*.yml` and `*.json` files, each with
//! one or more documents (`---`-separated YAML), of `kind: APIService` or `kind: List` /
//! `APIServiceList` holding APIServices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{ApiServiceEvent, ApiServiceSource};
use crate::apiservice::ApiService;
use crate::rt::Timer;

/// A manifest that could not be read: names the file, the document (0-based) and, when
/// known, the field. Displays as `<file>: <detail>`, e.g.
/// `apiservices/metrics.yaml: document 1: field spec.groupPriorityMinimum: invalid type:
/// string "high", expected i32`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}", file.display(), detail)]
pub struct ManifestError {
    /// The file.
    pub file: PathBuf,
    /// What is wrong, including the document index and field.
    pub detail: String,
}

/// Watches a directory of APIService manifests by polling it.
///
/// Every scan reads every file and compares its bytes with the last scan's, so a file
/// replaced by one of the same size and modification time is seen too. A changed file is
/// applied when it is complete:
///
/// - replaced by a rename (a new file under the old name, as rotation tools, editors that
///   write a copy and Kubernetes' ConfigMap volumes do): at once;
/// - rewritten in place (same file, new bytes), or new: once a second scan finds the same
///   bytes, so a file caught half-written (even truncated to empty) is not applied until
///   its writer is done; a file that really was emptied is applied a scan later;
/// - removed: at once.
///
/// The source then yields [`ApiServiceEvent::Resynced`] with every APIService of every
/// file. A file that does not parse is logged (with file, document index and field) and
/// its last good content is kept, so one bad edit never drops routes. Reading uses
/// blocking `std::fs` calls; manifest directories are small.
///
/// The first event comes at once (the directory as it is, even empty or unreadable);
/// later ones only after a scan applied a change. Files are read in name order;
/// subdirectories and other extensions are ignored. The source never ends.
///
/// ```
/// use kube_aggregator::source::ManifestDir;
///
/// let dir = std::env::temp_dir().join(format!("kube-aggregator-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("metrics.yaml"), r#"
/// apiVersion: apiregistration.k8s.io/v1
/// kind: APIService
/// metadata: {name: v1beta1.metrics.k8s.io}
/// spec:
///   service: {namespace: kube-system, name: metrics-server}
///   group: metrics.k8s.io
///   version: v1beta1
///   insecureSkipTLSVerify: true
///   groupPriorityMinimum: 100
///   versionPriority: 100
/// "#).unwrap();
///
/// // At start-up: every manifest, strictly validated.
/// let all = ManifestDir::load(&dir).unwrap();
/// assert_eq!(all[0].name(), "v1beta1.metrics.k8s.io");
///
/// std::fs::write(dir.join("broken.json"), "{").unwrap();
/// let err = ManifestDir::load(&dir).unwrap_err();
/// assert!(err.to_string().starts_with(&dir.join("broken.json").display().to_string()));
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug)]
pub struct ManifestDir {
    dir: PathBuf,
    timer: Timer,
    interval: Duration,
    seen: BTreeMap<PathBuf, Seen>,
    good: BTreeMap<PathBuf, Vec<ApiService>>,
    started: bool,
}

/// What a scan found in one file.
#[derive(Debug)]
struct Seen {
    /// Which file it is (device and inode), where the platform tells: a different one
    /// under the same name was renamed in.
    id: Option<(u64, u64)>,
    /// Its bytes.
    bytes: Vec<u8>,
    /// Whether these bytes were applied (parsed, and kept if good).
    applied: bool,
}

impl ManifestDir {
    /// Follows `dir` on tokio, scanning it every 2 s (a change shows within that).
    #[cfg(feature = "tokio")]
    pub fn watch(dir: impl Into<PathBuf>) -> ManifestDir {
        ManifestDir::new(dir, Timer::tokio(), Duration::from_secs(2))
    }

    /// A source over `dir`, polled every `interval` through `timer`. Nothing is read until
    /// the first [`ApiServiceSource::next_event`].
    pub fn new(dir: impl Into<PathBuf>, timer: Timer, interval: Duration) -> ManifestDir {
        ManifestDir {
            dir: dir.into(),
            timer,
            interval,
            seen: BTreeMap::new(),
            good: BTreeMap::new(),
            started: false,
        }
    }

    /// Reads every manifest of `dir` once, strictly: the first unreadable file, document
    /// that does not parse, or APIService that fails validation is an error naming the
    /// file and the document (`apiservices/metrics.yaml: document 1: APIService...`), the
    /// way a later re-read reports it. Hosts use it at start-up to refuse a bad
    /// configuration.
    ///
    /// # Errors
    ///
    /// A [`ManifestError`] naming the file for: a directory that cannot be listed, a file
    /// that cannot be read, a document that is not YAML or JSON, a `kind` other than
    /// `APIService`, `List` or `APIServiceList`, a field of the wrong type, or an
    /// APIService that fails validation (upstream's message).
    pub fn load(dir: &Path) -> Result<Vec<ApiService>, ManifestError> {
        let mut out = Vec::new();
        for file in manifest_files(dir)? {
            let text = read_file(&file)?;
            let docs = parse_documents(&text).map_err(|detail| ManifestError {
                file: file.clone(),
                detail,
            })?;
            for (at, svc) in docs {
                crate::apiservice::validate(&svc).map_err(|e| ManifestError {
                    file: file.clone(),
                    detail: format!("{at}: {e}"),
                })?;
                out.push(svc);
            }
        }
        Ok(out)
    }

    /// Re-reads the directory and applies the files that changed and are complete (see
    /// [`ManifestDir`]; on the first scan, all of them); true when that changed the
    /// APIServices.
    fn scan(&mut self) -> bool {
        let first = !self.started;
        let files = match manifest_files(&self.dir) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the APIService manifest directory; keeping the last good state");
                return false;
            }
        };
        let mut changed = false;
        let mut seen = BTreeMap::new();
        for f in files {
            let Some(now) = read_seen(&f) else {
                // Unreadable this time (being replaced, say): as it was.
                if let Some(prev) = self.seen.remove(&f) {
                    seen.insert(f, prev);
                }
                continue;
            };
            let prev = self.seen.remove(&f);
            let complete = match &prev {
                None => first,
                Some(prev) if prev.bytes == now.bytes => true,
                // A different file under the name: renamed in whole.
                Some(prev) => now.id.is_some() && prev.id != now.id,
            };
            let already = prev
                .as_ref()
                .is_some_and(|p| p.applied && p.bytes == now.bytes);
            let applied = already || complete;
            if complete && !already {
                changed |= self.apply(&f, &now.bytes);
            } else if !applied {
                tracing::debug!(file = %f.display(), "manifest changed; applied once a scan finds it unchanged");
            }
            seen.insert(f, Seen { applied, ..now });
        }
        // Removed files.
        let gone: Vec<PathBuf> = self
            .good
            .keys()
            .filter(|f| !seen.contains_key(*f))
            .cloned()
            .collect();
        for f in gone {
            self.good.remove(&f);
            changed = true;
        }
        self.seen = seen;
        changed || first
    }

    /// Parses `bytes` as `file`'s manifests and keeps them; true when that changed its
    /// APIServices. A file that does not parse is logged and its last good content kept.
    fn apply(&mut self, file: &Path, bytes: &[u8]) -> bool {
        let parsed = std::str::from_utf8(bytes)
            .map_err(|e| ManifestError {
                file: file.to_owned(),
                detail: format!("cannot read: {e}"),
            })
            .and_then(|text| {
                parse_manifests(text).map_err(|detail| ManifestError {
                    file: file.to_owned(),
                    detail,
                })
            });
        match parsed {
            Ok(list) => {
                let same = self.good.get(file) == Some(&list);
                self.good.insert(file.to_owned(), list);
                !same
            }
            Err(e) => {
                tracing::warn!(error = %e, "invalid APIService manifest; keeping its last good content");
                false
            }
        }
    }

    /// Every APIService of the last good content of every file, in file order.
    fn all(&self) -> Vec<ApiService> {
        self.good.values().flatten().cloned().collect()
    }
}

impl ApiServiceSource for ManifestDir {
    async fn next_event(&mut self) -> Option<ApiServiceEvent> {
        if !self.started {
            self.scan();
            self.started = true;
            return Some(ApiServiceEvent::Resynced(self.all()));
        }
        loop {
            self.timer.sleep(self.interval).await;
            if self.scan() {
                return Some(ApiServiceEvent::Resynced(self.all()));
            }
        }
    }
}

/// The `*.yaml`, `*.yml` and `*.json` files directly in `dir`, sorted by path.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ManifestError {
        file: dir.to_owned(),
        detail: format!("cannot read directory: {e}"),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    Ok(files)
}

/// `file`'s bytes and identity; `None` (logged) when it cannot be read.
fn read_seen(file: &Path) -> Option<Seen> {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read an APIService manifest; keeping its last good content");
            return None;
        }
    };
    #[cfg(unix)]
    let id = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(file).ok().map(|m| (m.dev(), m.ino()))
    };
    #[cfg(not(unix))]
    let id = None;
    Some(Seen {
        id,
        bytes,
        applied: false,
    })
}

fn read_file(file: &Path) -> Result<String, ManifestError> {
    std::fs::read_to_string(file).map_err(|e| ManifestError {
        file: file.to_owned(),
        detail: format!("cannot read: {e}"),
    })
}

/// Parses multi-document YAML (JSON is YAML) into APIServices; the error names the
/// document index and the field.
pub(crate) fn parse_manifests(text: &str) -> Result<Vec<ApiService>, String> {
    Ok(parse_documents(text)?.into_iter().map(|(_, s)| s).collect())
}

/// As [`parse_manifests`], each APIService with where it was found (`document 2`, or
/// `document 0: items[3]` in a list).
fn parse_documents(text: &str) -> Result<Vec<(String, ApiService)>, String> {
    let mut out = Vec::new();
    for (index, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value =
            serde_yaml_ng::Value::deserialize(doc).map_err(|e| format!("document {index}: {e}"))?;
        if value.is_null() {
            continue; // an empty document, e.g. after a trailing `---`
        }
        collect(value, index, &mut out)?;
    }
    Ok(out)
}

/// Adds the APIServices of one parsed document to `out`: the document itself, or each
/// item of a `List`/`APIServiceList` (every item must be an APIService).
fn collect(
    value: serde_yaml_ng::Value,
    index: usize,
    out: &mut Vec<(String, ApiService)>,
) -> Result<(), String> {
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "APIService" => {
            let svc: ApiService =
                serde_path_to_error(value).map_err(|e| format!("document {index}: {e}"))?;
            out.push((format!("document {index}"), svc));
            Ok(())
        }
        "List" | "APIServiceList" => {
            let items = match value.get("items") {
                None => return Ok(()),
                Some(serde_yaml_ng::Value::Sequence(items)) => items.clone(),
                Some(_) => return Err(format!("document {index}: field items: expected a list")),
            };
            for (i, item) in items.into_iter().enumerate() {
                let item_kind = item
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default();
                if item_kind != "APIService" {
                    return Err(format!(
                        "document {index}: items[{i}].kind: expected APIService, found {item_kind:?}"
                    ));
                }
                let svc: ApiService = serde_path_to_error(item)
                    .map_err(|e| format!("document {index}: items[{i}].{e}"))?;
                out.push((format!("document {index}: items[{i}]"), svc));
            }
            Ok(())
        }
        "" => Err(format!("document {index}: field kind: missing")),
        other => Err(format!(
            "document {index}: field kind: expected APIService or List, found {other:?}"
        )),
    }
}

/// Deserializes an APIService; the error names the failing field's path
/// (e.g. `spec.groupPriorityMinimum`).
fn serde_path_to_error(value: serde_yaml_ng::Value) -> Result<ApiService, String> {
    serde_path_to_error::deserialize::<_, ApiService>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner.to_string()
        } else {
            format!("field {path}: {inner}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multi_document_yaml_and_lists() {
        let text = r#"
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec: {service: {namespace: kube-system, name: metrics-server}, group: metrics.k8s.io,
  version: v1beta1, insecureSkipTLSVerify: true, groupPriorityMinimum: 100, versionPriority: 100}
---
kind: List
apiVersion: v1
items:
- apiVersion: apiregistration.k8s.io/v1
  kind: APIService
  metadata: {name: v1.example.com}
  spec: {group: example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15}
---
"#;
        let got = parse_manifests(text).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name(), "v1beta1.metrics.k8s.io");
        assert_eq!(got[0].spec.service.as_ref().unwrap().port_or_default(), 443);
        assert!(got[1].is_local());
    }

    #[test]
    fn start_up_load_names_the_file_and_document_of_an_invalid_apiservice() {
        let dir = std::env::temp_dir().join(format!("ka-manifests-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let good = "kind: APIService\nmetadata: {name: v1.a.io}\nspec: {group: a.io, version: v1, groupPriorityMinimum: 1, versionPriority: 1}\n";
        std::fs::write(dir.join("a.yaml"), good).unwrap();
        // Parses, but the name is not <version>.<group>.
        let bad = format!(
            "{good}---\nkind: APIService\nmetadata: {{name: wrong}}\nspec: {{group: b.io, version: v1, groupPriorityMinimum: 1, versionPriority: 1}}\n"
        );
        std::fs::write(dir.join("b.yaml"), bad).unwrap();
        let err = ManifestDir::load(&dir).unwrap_err();
        assert_eq!(err.file, dir.join("b.yaml"));
        assert!(err.detail.starts_with("document 1: "), "{err}");
        assert!(err.detail.contains("wrong"), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("{}: document 1: ", dir.join("b.yaml").display()))
        );
        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        assert_eq!(ManifestDir::load(&dir).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A remote APIService's manifest, and the part of it before `service:`, which
    /// alone parses as a local APIService.
    const REMOTE: &str = "kind: APIService\nmetadata: {name: v1.a.io}\nspec:\n  group: a.io\n  version: v1\n  groupPriorityMinimum: 1\n  versionPriority: 1\n  insecureSkipTLSVerify: true\n  service: {namespace: ns, name: svc}\n";

    fn scratch(name: &str) -> (PathBuf, ManifestDir) {
        let dir = std::env::temp_dir().join(format!("ka-manifests-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let source = ManifestDir::new(
            &dir,
            crate::testing::StoppedClock::new().timer(),
            Duration::from_secs(1),
        );
        (dir, source)
    }

    /// Rewrites `path` in place (the same file, truncated), as `>` in a shell does.
    fn write_in_place(path: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::File::options()
            .write(true)
            .truncate(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// The APIServices the source holds: name and whether local.
    fn held(source: &ManifestDir) -> Vec<(String, bool)> {
        source
            .all()
            .iter()
            .map(|s| (s.name().to_owned(), s.is_local()))
            .collect()
    }

    #[test]
    fn a_manifest_rewritten_in_place_is_applied_once_it_is_whole() {
        let (dir, mut source) = scratch("in-place");
        let file = dir.join("a.yaml");
        std::fs::write(&file, REMOTE).unwrap();
        assert!(source.scan(), "the first scan applies");
        source.started = true;
        let remote = vec![("v1.a.io".to_owned(), false)];
        assert_eq!(held(&source), remote);

        // Caught half-written: the part before `service:` is a valid local APIService.
        let (head, _) = REMOTE.split_at(REMOTE.find("  service:").unwrap());
        write_in_place(&file, head);
        assert!(!source.scan());
        assert_eq!(held(&source), remote, "a half-written file was applied");
        // Finished, but only seen once: still waiting.
        let edited = REMOTE.replace("name: svc", "name: svc2");
        write_in_place(&file, &edited);
        assert!(!source.scan());
        assert_eq!(held(&source), remote);
        // The same bytes a second time: applied.
        assert!(source.scan());
        let service = source.all()[0].spec.service.clone().unwrap();
        assert_eq!(service.name, "svc2");
        assert!(!source.scan(), "nothing more to apply");

        // Truncated to empty, then written again: never dropped.
        write_in_place(&file, "");
        assert!(!source.scan());
        assert_eq!(held(&source), remote, "an emptied file was applied at once");
        write_in_place(&file, &edited);
        assert!(!source.scan());
        assert!(!source.scan(), "the same content as applied");
        assert_eq!(held(&source), remote);
        // Emptied for good: applied once a scan finds it still empty.
        write_in_place(&file, "");
        assert!(!source.scan());
        assert_eq!(held(&source), remote);
        assert!(source.scan());
        assert!(held(&source).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn replaced_by_rename_applies_at_once_and_new_files_once_whole() {
        let (dir, mut source) = scratch("rename");
        let file = dir.join("a.yaml");
        std::fs::write(&file, REMOTE).unwrap();
        assert!(source.scan());
        source.started = true;
        // A new file under the name, with the same size and modification time.
        let edited = REMOTE.replace("name: svc}", "name: svx}");
        assert_eq!(edited.len(), REMOTE.len());
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        let tmp = dir.join("a.yaml.tmp");
        std::fs::write(&tmp, &edited).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&tmp)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert!(source.scan(), "a file renamed in is applied at once");
        let service = source.all()[0].spec.service.clone().unwrap();
        assert_eq!(service.name, "svx");

        // The same size and time, rewritten in place: seen by its bytes, a scan later.
        write_in_place(&file, REMOTE);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert!(!source.scan());
        assert!(source.scan());
        assert_eq!(source.all()[0].spec.service.clone().unwrap().name, "svc");

        // A new file: once a second scan finds it whole. A removed one: at once.
        let other = REMOTE
            .replace("v1.a.io", "v1.b.io")
            .replace("a.io\n", "b.io\n");
        std::fs::write(dir.join("b.yaml"), &other).unwrap();
        assert!(!source.scan());
        assert!(source.scan());
        assert_eq!(
            held(&source),
            [("v1.a.io".to_owned(), false), ("v1.b.io".to_owned(), false)]
        );
        std::fs::remove_file(&file).unwrap();
        assert!(source.scan());
        assert_eq!(held(&source), [("v1.b.io".to_owned(), false)]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_name_document_and_field() {
        let text = "kind: APIService\nmetadata: {name: v1.a}\nspec: {group: a, version: v1, groupPriorityMinimum: 1, versionPriority: 1}\n---\nkind: APIService\nmetadata: {name: v1.b}\nspec: {groupPriorityMinimum: lots}\n";
        let err = parse_manifests(text).unwrap_err();
        assert!(err.starts_with("document 1: "), "{err}");
        assert!(err.contains("groupPriorityMinimum"), "{err}");
        let err = parse_manifests("kind: Pod\n").unwrap_err();
        assert_eq!(
            err,
            "document 0: field kind: expected APIService or List, found \"Pod\""
        );
        let err = parse_manifests("kind: APIService\nspec:\n  caBundle: '%%%'\n").unwrap_err();
        assert!(err.contains("caBundle"), "{err}");
    }
}
