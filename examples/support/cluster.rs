//! The small, fixed "cluster" the examples serve: nodes and pods that the gateway's core
//! API lists and the sample metrics server reports usage for. Both read this one table so
//! that `kubectl top nodes` can match metrics to nodes.

/// A node of the sample cluster.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// The node's name.
    pub name: &'static str,
    /// Allocatable CPU in millicores.
    pub cpu_millis: u64,
    /// Allocatable memory in KiB.
    pub memory_kib: u64,
    /// Current usage.
    pub usage: Usage,
}

/// What a node or a container uses now.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// CPU in nanocores.
    pub cpu_nanos: u64,
    /// Memory working set in KiB.
    pub memory_kib: u64,
}

/// A container of a sample pod, with its current usage.
#[derive(Debug, Clone, Copy)]
pub struct Container {
    /// The container's name.
    pub name: &'static str,
    /// Its image.
    pub image: &'static str,
    /// Current usage.
    pub usage: Usage,
}

/// A pod of the sample cluster.
#[derive(Debug, Clone, Copy)]
pub struct Pod {
    /// The pod's namespace.
    pub namespace: &'static str,
    /// Its name.
    pub name: &'static str,
    /// The node it runs on.
    pub node: &'static str,
    /// Its containers.
    pub containers: &'static [Container],
}

/// The nodes.
pub const NODES: &[Node] = &[
    Node {
        name: "node-a",
        cpu_millis: 4000,
        memory_kib: 16_384_000,
        usage: Usage {
            cpu_nanos: 612_345_678,
            memory_kib: 5_242_880,
        },
    },
    Node {
        name: "node-b",
        cpu_millis: 8000,
        memory_kib: 32_768_000,
        usage: Usage {
            cpu_nanos: 1_834_000_000,
            memory_kib: 12_582_912,
        },
    },
];

/// The pods, on the nodes of [`NODES`].
pub const PODS: &[Pod] = &[
    Pod {
        namespace: "kube-system",
        name: "coredns-6f6b679f8f-x2k9d",
        node: "node-a",
        containers: &[Container {
            name: "coredns",
            image: "registry.k8s.io/coredns/coredns:v1.11.3",
            usage: Usage {
                cpu_nanos: 3_512_000,
                memory_kib: 17_204,
            },
        }],
    },
    Pod {
        namespace: "kube-system",
        name: "metrics-server-7d4b8c6d9-q8mzs",
        node: "node-b",
        containers: &[Container {
            name: "metrics-server",
            image: "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
            usage: Usage {
                cpu_nanos: 5_120_000,
                memory_kib: 24_576,
            },
        }],
    },
    Pod {
        namespace: "default",
        name: "web-5c9d7f7b8-4hx2p",
        node: "node-a",
        containers: &[
            Container {
                name: "nginx",
                image: "nginx:1.27",
                usage: Usage {
                    cpu_nanos: 1_250_000,
                    memory_kib: 8_192,
                },
            },
            Container {
                name: "log-shipper",
                image: "fluent/fluent-bit:3.1",
                usage: Usage {
                    cpu_nanos: 2_004_000,
                    memory_kib: 12_800,
                },
            },
        ],
    },
    Pod {
        namespace: "default",
        name: "api-7b9f8c5d6-tm2lq",
        node: "node-b",
        containers: &[Container {
            name: "api",
            image: "ghcr.io/example/api:2.4.1",
            usage: Usage {
                cpu_nanos: 48_900_000,
                memory_kib: 131_072,
            },
        }],
    },
];

/// A fixed creation time for every object, RFC 3339.
pub const CREATED: &str = "2026-11-30T09:00:00Z";
