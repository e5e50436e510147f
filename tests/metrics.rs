//! `/metrics` end to end: kubectl through the demo's gateway, the exposition parsed as the
//! Prometheus text format (strictly: every line a comment, a `# HELP`/`# TYPE` for the
//! family it precedes, or a sample of a declared family with well-formed labels), and
//! upstream's names, labels and buckets checked for the requests kubectl made.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use std::collections::BTreeMap;

use kubectl_cli::{scratch_dir, start_demo};

/// One sample: the metric name, its labels, its value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The families (name to type) and samples of `text`, or the first malformed line.
fn parse(text: &str) -> Result<(BTreeMap<String, String>, Vec<Sample>), String> {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = |why: &str| Err(format!("line {}: {why}: {line:?}", n + 1));
        if line.is_empty() {
            return bad("empty line");
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return bad("unknown type");
                    }
                    if types.insert(name.to_owned(), kind.to_owned()).is_some() {
                        return bad("a second TYPE");
                    }
                }
                (Some("HELP"), Some(_), _) => {}
                _ => return bad("a comment that is neither HELP nor TYPE"),
            }
            continue;
        }
        let (series, value) = match line.rsplit_once(' ') {
            Some(parts) => parts,
            None => return bad("no value"),
        };
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse() {
                Ok(v) => v,
                Err(_) => return bad("a value that is not a number"),
            },
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let Some(body) = rest.strip_suffix('}') else {
                    return bad("labels not closed");
                };
                let mut labels = BTreeMap::new();
                let mut rest = body;
                while !rest.is_empty() {
                    let Some((key, after)) = rest.split_once("=\"") else {
                        return bad("a label without =\"");
                    };
                    if key.is_empty()
                        || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    {
                        return bad("a bad label name");
                    }
                    // The value ends at the first quote not escaped.
                    let mut value = String::new();
                    let mut chars = after.char_indices();
                    let end = loop {
                        match chars.next() {
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, c @ ('\\' | '"'))) => value.push(c),
                                _ => return bad("a bad escape"),
                            },
                            Some((i, '"')) => break i,
                            Some((_, c)) => value.push(c),
                            None => return bad("a label value not closed"),
                        }
                    };
                    if labels.insert(key.to_owned(), value).is_some() {
                        return bad("a label twice");
                    }
                    rest = &after[end + 1..];
                    rest = rest.strip_prefix(',').unwrap_or(rest);
                }
                (name, labels)
            }
        };
        let family = ["_bucket", "_sum", "_count", "_total", "_created"]
            .iter()
            .find_map(|suffix| {
                let base = name.strip_suffix(suffix)?;
                types.contains_key(base).then_some(base)
            })
            .unwrap_or(name);
        if !types.contains_key(family) {
            return bad("a sample of no declared family");
        }
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    Ok((types, samples))
}

/// The samples named `name` whose labels include `with`.
fn find<'a>(samples: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_through_kubectl_carry_upstreams_names_labels_and_buckets() {
    let dir = scratch_dir("metrics");
    let (demo, kubectl) = start_demo(&dir, Default::default()).await;

    let nodes = "/apis/metrics.k8s.io/v1beta1/nodes";
    for _ in 0..3 {
        kubectl.ok(&["get", "--raw", nodes]).await;
    }
    let (ok, _, stderr) = kubectl
        .run(&[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/nodes/no-such-node",
        ])
        .await;
    assert!(!ok, "a node that does not exist");
    assert!(
        stderr.contains("NotFound") || stderr.contains("not found"),
        "{stderr}"
    );

    let text = kubectl.ok(&["get", "--raw", "/metrics"]).await;
    let (types, samples) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Families as kube-apiserver's Go client writes them (a counter's TYPE names its
    // `_total` series); families without a series yet are not written at all.
    for (family, kind) in [
        ("apiserver_request_total", "counter"),
        ("apiserver_request_duration_seconds", "histogram"),
        ("apiserver_response_sizes", "histogram"),
        ("apiserver_audit_event_total", "counter"),
        ("apiserver_audit_level_total", "counter"),
        ("aggregator_unavailable_apiservice", "gauge"),
        ("apiserver_current_inflight_requests", "gauge"),
        ("aggregator_discovery_aggregation_count_total", "counter"),
        ("aggregator_proxy_request_duration_seconds", "histogram"),
    ] {
        assert_eq!(
            types.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }

    let list = [
        ("verb", "LIST"),
        ("dry_run", ""),
        ("group", "metrics.k8s.io"),
        ("version", "v1beta1"),
        ("resource", "nodes"),
        ("subresource", ""),
        ("scope", "cluster"),
        ("component", "apiserver"),
    ];
    let total = find(&samples, "apiserver_request_total", &list);
    assert_eq!(total.len(), 1, "one series: {total:?}");
    assert_eq!(total[0].labels["code"], "200");
    assert_eq!(total[0].value, 3.0);
    assert_eq!(total[0].labels.len(), 9, "upstream's nine labels");

    // The same requests reached the backend: the proxy's latency for the APIService,
    // by code (the three lists, and the GET of a node the backend does not have).
    let proxied = find(
        &samples,
        "aggregator_proxy_request_duration_seconds_count",
        &[("apiservice", "v1beta1.metrics.k8s.io"), ("code", "200")],
    );
    assert_eq!(proxied.len(), 1, "{proxied:?}");
    assert!(proxied[0].value >= 3.0, "{proxied:?}");
    assert_eq!(
        find(
            &samples,
            "aggregator_proxy_request_duration_seconds_bucket",
            &[("apiservice", "v1beta1.metrics.k8s.io"), ("code", "200")],
        )
        .len(),
        16,
        "15 bounds from 1 ms to 60 s, and +Inf"
    );

    // The node that does not exist: a GET of one resource, 404.
    let get = find(
        &samples,
        "apiserver_request_total",
        &[("verb", "GET"), ("scope", "resource"), ("code", "404")],
    );
    assert_eq!(get.len(), 1, "{get:?}");

    let buckets: Vec<String> = find(&samples, "apiserver_request_duration_seconds_bucket", &list)
        .iter()
        .map(|s| s.labels["le"].clone())
        .collect();
    let upstream = [
        "0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "1.25", "1.5", "2.0",
        "3.0", "4.0", "5.0", "6.0", "8.0", "10.0", "15.0", "20.0", "30.0", "45.0", "60.0", "+Inf",
    ];
    let parsed = |v: &str| v.parse::<f64>().unwrap_or(f64::INFINITY);
    assert_eq!(
        buckets.iter().map(|b| parsed(b)).collect::<Vec<_>>(),
        upstream.iter().map(|b| parsed(b)).collect::<Vec<_>>()
    );
    let count = find(&samples, "apiserver_request_duration_seconds_count", &list);
    assert_eq!(count[0].value, 3.0);
    let sizes = find(
        &samples,
        "apiserver_response_sizes_bucket",
        &[("verb", "LIST"), ("resource", "nodes")],
    );
    let size_buckets: Vec<f64> = sizes.iter().map(|s| parsed(&s.labels["le"])).collect();
    assert_eq!(
        size_buckets,
        [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, f64::INFINITY],
        "upstream's 1 kB to 1 GB"
    );

    // Authentication and authorization, by result, with upstream's names (its
    // authentication counters have no `_total`).
    let authenticated = find(
        &samples,
        "authentication_attempts",
        &[("result", "success")],
    );
    assert!(authenticated[0].value >= 5.0, "{authenticated:?}");
    assert_eq!(types["authentication_attempts"], "untyped");
    let users = find(
        &samples,
        "authenticated_user_requests",
        &[("username", "other")],
    );
    assert!(users[0].value >= 5.0, "{users:?}");
    let allowed = find(
        &samples,
        "authorization_attempts_total",
        &[("result", "allowed")],
    );
    assert!(allowed[0].value >= 5.0, "{allowed:?}");
    assert_eq!(
        find(
            &samples,
            "authorization_duration_seconds_bucket",
            &[("result", "allowed")]
        )
        .len(),
        16,
        "upstream's 15 buckets from 1 ms, and +Inf"
    );

    // The demo's discovery document was aggregated at least once before it was ready.
    let aggregations = find(
        &samples,
        "aggregator_discovery_aggregation_count_total",
        &[],
    );
    assert!(aggregations[0].value >= 1.0, "{aggregations:?}");

    // The scrape itself is in flight (a read-only request) while it is written.
    let read_only = find(
        &samples,
        "apiserver_current_inflight_requests",
        &[("request_kind", "readOnly")],
    );
    assert!(read_only[0].value >= 1.0, "{read_only:?}");

    // Authorized as upstream: get on the non-resource URL /metrics.
    let (ok, _, stderr) = kubectl
        .run(&["--user=demo-viewer", "get", "--raw", "/metrics"])
        .await;
    assert!(!ok, "demo-viewer may not read /metrics");
    assert!(
        stderr.contains("Forbidden") || stderr.contains("forbidden"),
        "{stderr}"
    );

    demo.shutdown().await;
}

#[test]
fn the_parser_refuses_what_prometheus_refuses() {
    let good = "# HELP a_total A.\n# TYPE a counter\na_total{x=\"1\",y=\"q\\\"\"} 2\n";
    let (types, samples) = parse(good).expect("well formed");
    assert_eq!(types["a"], "counter");
    assert_eq!(samples[0].labels["y"], "q\"");
    for bad in [
        "a_total 1\n",
        "# TYPE a counter\na_total{x=\"1\" 1\n",
        "# TYPE a counter\na_total{x=1} 1\n",
        "# TYPE a counter\na_total one\n",
        "# TYPE a counter\n# TYPE a gauge\n",
        "# TYPE a counter\n\na_total 1\n",
        "# TYPE a counter\na_total{x=\"1\",x=\"2\"} 1\n",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}
