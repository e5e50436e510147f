//! The two kinds of `servicecatalog.example.io/v1beta1`, described once: their schema
//! (what strict field validation checks and what the OpenAPI documents publish), their
//! `Table` columns and the fields their field selectors accept. Shaped like the
//! Kubernetes service-catalog's `ServiceInstance` (namespaced) and `ClusterServiceBroker`
//! (cluster-scoped).

use serde_json::Value;

/// The API group.
pub const GROUP: &str = "servicecatalog.example.io";
/// The version served.
pub const VERSION: &str = "v1beta1";
/// `<group>/<version>`.
pub const GROUP_VERSION: &str = "servicecatalog.example.io/v1beta1";

/// A JSON type of the schema.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// A string.
    String,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// An integer (int64).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// An object with these fields and no others.
    Object(&'static [Field]),
    /// An object of string values (`map[string]string`).
    StringMap,
    /// Any JSON object, kept as sent (`x-kubernetes-preserve-unknown-fields`).
    FreeForm,
    /// A list of strings.
    StringList,
    /// A list of objects kept as sent.
    ObjectList,
}

/// One field of an object.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The JSON name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// What it means (what `kubectl explain` prints).
    pub description: &'static str,
    /// Whether validation requires it.
    pub required: bool,
}

const fn field(name: &'static str, ty: Ty, description: &'static str) -> Field {
    Field {
        name,
        ty,
        description,
        required: false,
    }
}

const fn required(name: &'static str, ty: Ty, description: &'static str) -> Field {
    Field {
        name,
        ty,
        description,
        required: true,
    }
}

/// One `Table` column: its definition and how a cell is read from an object.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header.
    pub name: &'static str,
    /// The OpenAPI type of the cells (`string`, `integer`, `date`).
    pub ty: &'static str,
    /// The format (`name` for the name column).
    pub format: &'static str,
    /// What it shows.
    pub description: &'static str,
    /// 0 always shown, 1 with `-o wide`.
    pub priority: u8,
    /// A JSON pointer into the object, or `""` for the age.
    pub pointer: &'static str,
}

/// A served kind.
#[derive(Debug)]
pub struct Kind {
    /// `ServiceInstance`.
    pub kind: &'static str,
    /// `serviceinstances`.
    pub plural: &'static str,
    /// `serviceinstance`.
    pub singular: &'static str,
    /// `kubectl get inst`.
    pub short_names: &'static [&'static str],
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// `kubectl explain` text of the kind.
    pub description: &'static str,
    /// The fields of `spec`.
    pub spec: &'static [Field],
    /// Table columns after `Name`.
    pub columns: &'static [Column],
    /// Fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    pub selectable: &'static [(&'static str, &'static str)],
}

impl Kind {
    /// `<plural>.<group>`, the qualified resource of messages.
    pub fn qualified(&self) -> String {
        format!("{}.{GROUP}", self.plural)
    }

    /// The value of a selectable field (`metadata.name`, `spec.url`, ...) of `object`.
    pub fn field_value(&self, object: &Value, field: &str) -> Option<String> {
        let pointer = match field {
            "metadata.name" => "/metadata/name",
            "metadata.namespace" => "/metadata/namespace",
            f => self.selectable.iter().find(|(name, _)| *name == f)?.1,
        };
        Some(
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )
    }

    /// Whether field selectors may name `field`.
    pub fn is_selectable(&self, field: &str) -> bool {
        matches!(field, "metadata.name" | "metadata.namespace")
            || self.selectable.iter().any(|(f, _)| *f == field)
    }
}

/// `metadata.name`'s description, as the generic printer's `Name` column has it.
pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

const AGE: Column = Column {
    name: "Age",
    ty: "string",
    format: "",
    description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
    priority: 0,
    pointer: "",
};

/// `ServiceInstance`: a provisioned instance of a service class and plan, namespaced.
pub const SERVICE_INSTANCE: Kind = Kind {
    kind: "ServiceInstance",
    plural: "serviceinstances",
    singular: "serviceinstance",
    short_names: &["inst"],
    namespaced: true,
    description: "ServiceInstance represents a provisioned instance of a ClusterServiceClass and plan, offered by a ClusterServiceBroker.",
    spec: &[
        required(
            "clusterServiceClassExternalName",
            Ty::String,
            "The external name of the service class to provision, as the broker lists it.",
        ),
        required(
            "clusterServicePlanExternalName",
            Ty::String,
            "The external name of the plan of that class.",
        ),
        field(
            "parameters",
            Ty::FreeForm,
            "Parameters for the broker's provision request, passed as they are.",
        ),
        field(
            "externalID",
            Ty::String,
            "The identity the broker knows this instance by.",
        ),
        field(
            "updateRequests",
            Ty::Integer,
            "A counter a user increments to ask for an update with unchanged parameters.",
        ),
    ],
    columns: &[
        Column {
            name: "Class",
            ty: "string",
            format: "",
            description: "The external name of the service class.",
            priority: 0,
            pointer: "/spec/clusterServiceClassExternalName",
        },
        Column {
            name: "Plan",
            ty: "string",
            format: "",
            description: "The external name of the plan.",
            priority: 0,
            pointer: "/spec/clusterServicePlanExternalName",
        },
        AGE,
        Column {
            name: "External-ID",
            ty: "string",
            format: "",
            description: "The identity the broker knows this instance by.",
            priority: 1,
            pointer: "/spec/externalID",
        },
    ],
    selectable: &[
        (
            "spec.clusterServiceClassExternalName",
            "/spec/clusterServiceClassExternalName",
        ),
        (
            "spec.clusterServicePlanExternalName",
            "/spec/clusterServicePlanExternalName",
        ),
    ],
};

/// `ClusterServiceBroker`: a service broker the catalog lists classes from, cluster-scoped.
pub const CLUSTER_SERVICE_BROKER: Kind = Kind {
    kind: "ClusterServiceBroker",
    plural: "clusterservicebrokers",
    singular: "clusterservicebroker",
    short_names: &["csb"],
    namespaced: false,
    description: "ClusterServiceBroker represents an entity that provides ClusterServiceClasses for use in the service catalog.",
    spec: &[
        required(
            "url",
            Ty::String,
            "The URL of the broker's Open Service Broker API endpoint.",
        ),
        field(
            "relistBehavior",
            Ty::Enum(&["Duration", "Manual"]),
            "How the catalog is relisted: every relistDuration, or only when relistRequests changes.",
        ),
        field(
            "relistDuration",
            Ty::String,
            "How often the catalog is relisted, as a Go duration, with relistBehavior Duration.",
        ),
        field(
            "relistRequests",
            Ty::Integer,
            "A counter a user increments to ask for a relist.",
        ),
        field(
            "insecureSkipTLSVerify",
            Ty::Boolean,
            "Skip verification of the broker's serving certificate.",
        ),
    ],
    columns: &[
        Column {
            name: "URL",
            ty: "string",
            format: "",
            description: "The URL of the broker.",
            priority: 0,
            pointer: "/spec/url",
        },
        AGE,
        Column {
            name: "Relist",
            ty: "string",
            format: "",
            description: "How the catalog is relisted.",
            priority: 1,
            pointer: "/spec/relistBehavior",
        },
    ],
    selectable: &[("spec.url", "/spec/url")],
};

/// Both kinds.
pub const KINDS: [&Kind; 2] = [&SERVICE_INSTANCE, &CLUSTER_SERVICE_BROKER];

/// The kind served under `plural`.
pub fn by_plural(plural: &str) -> Option<&'static Kind> {
    KINDS.into_iter().find(|k| k.plural == plural)
}

/// The fields of `metadata` (`ObjectMeta`) a client may send.
pub const OBJECT_META: &[Field] = &[
    field("name", Ty::String, NAME_DESCRIPTION),
    field(
        "generateName",
        Ty::String,
        "A prefix the server appends a random suffix to when name is not set.",
    ),
    field(
        "namespace",
        Ty::String,
        "The namespace the object is in; empty for cluster-scoped objects.",
    ),
    field("selfLink", Ty::String, "Deprecated and unset."),
    field(
        "uid",
        Ty::String,
        "The unique identity the server gave the object at creation. Read-only.",
    ),
    field(
        "resourceVersion",
        Ty::String,
        "An opaque value that changes on every write; sent back on updates for optimistic concurrency. Read-only.",
    ),
    field(
        "generation",
        Ty::Integer,
        "A sequence number of changes to the desired state (everything but metadata). Read-only.",
    ),
    field(
        "creationTimestamp",
        Ty::String,
        "When the object was created, in RFC 3339. Read-only.",
    ),
    field(
        "deletionTimestamp",
        Ty::String,
        "When the object will be deleted, once finalizers are done. Read-only.",
    ),
    field(
        "deletionGracePeriodSeconds",
        Ty::Integer,
        "Seconds allowed for graceful termination. Read-only.",
    ),
    field(
        "labels",
        Ty::StringMap,
        "Key-value pairs to select objects by.",
    ),
    field(
        "annotations",
        Ty::StringMap,
        "Key-value pairs tools store on the object.",
    ),
    field(
        "ownerReferences",
        Ty::ObjectList,
        "The objects this object depends on.",
    ),
    field(
        "finalizers",
        Ty::StringList,
        "Names that must be removed before the object is deleted.",
    ),
    field(
        "managedFields",
        Ty::ObjectList,
        "Field ownership, for server-side apply.",
    ),
];
