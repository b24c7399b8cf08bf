//! The kinds the gate reads, named once: their API group, versions,
//! resource, and the lists the live reader makes of them (a namespace, a
//! field selector). The view keeps them ([`kept`]), the live reader
//! lists them ([`listings`], `crate::cluster::live`), a must-gather's layout
//! files them by group and resource (`crate::cluster::snapshot`), and the
//! gate's ClusterRole must grant each list (tests/it/deploy.rs holds the
//! rendered RBAC to this table). A new data source is one entry here and
//! its reading in [`super::ClusterView::add_from`]: every caller names
//! a kind by its `Kind`, never by a string.

/// One kind the gate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub name: &'static str,
    /// The API group, empty for the core group.
    pub group: &'static str,
    /// The version listed live.
    pub version: &'static str,
    /// Older versions a snapshot may hold the kind in, read the same way.
    pub older: &'static [&'static str],
    /// The resource, as in a URL and a must-gather's folders.
    pub plural: &'static str,
    /// The lists the live reader makes: every object, unless narrowed.
    pub listings: &'static [Listing],
}

/// One list the live reader makes of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Limit the list to one namespace.
    pub namespace: Option<&'static str>,
    /// A field selector, so the API server filters (by name, type, phase).
    pub fields: Option<&'static str>,
}

impl Listing {
    /// The one object the list names by its field selector
    /// (`metadata.name=admin-acks`), if it names one.
    pub fn name(&self) -> Option<&'static str> {
        self.fields?
            .split(',')
            .find_map(|f| f.strip_prefix("metadata.name="))
    }
}

/// One list of every object of the kind.
const EVERY: &[Listing] = &[Listing {
    namespace: None,
    fields: None,
}];

const fn kind(
    name: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
) -> Kind {
    Kind {
        name,
        group,
        version,
        older: &[],
        plural,
        listings: EVERY,
    }
}

pub const CLUSTER_VERSION: Kind = kind(
    "ClusterVersion",
    "config.openshift.io",
    "v1",
    "clusterversions",
);
pub const CLUSTER_OPERATOR: Kind = kind(
    "ClusterOperator",
    "config.openshift.io",
    "v1",
    "clusteroperators",
);
pub const INFRASTRUCTURE: Kind = kind(
    "Infrastructure",
    "config.openshift.io",
    "v1",
    "infrastructures",
);
/// A core `v1` Node; since 4.12 a must-gather also holds the nodes
/// configuration, `config.openshift.io/v1` `Node` named `cluster`, which
/// is no Node of the cluster.
pub const NODE: Kind = kind("Node", "", "v1", "nodes");
/// Pods that may still run: finished ones are never listed.
pub const POD: Kind = Kind {
    listings: &[Listing {
        namespace: None,
        fields: Some("status.phase!=Succeeded,status.phase!=Failed"),
    }],
    ..kind("Pod", "", "v1", "pods")
};
pub const POD_DISRUPTION_BUDGET: Kind = Kind {
    older: &["v1beta1"],
    ..kind(
        "PodDisruptionBudget",
        "policy",
        "v1",
        "poddisruptionbudgets",
    )
};
pub const MACHINE_CONFIG_POOL: Kind = kind(
    "MachineConfigPool",
    "machineconfiguration.openshift.io",
    "v1",
    "machineconfigpools",
);
/// One per node since 4.19 (`v1alpha1` behind TechPreviewNoUpgrade from
/// 4.16): the machine-config daemon's phases of the node's update, which
/// the plan times nodes by.
pub const MACHINE_CONFIG_NODE: Kind = Kind {
    older: &["v1alpha1"],
    ..kind(
        "MachineConfigNode",
        "machineconfiguration.openshift.io",
        "v1",
        "machineconfignodes",
    )
};
pub const API_REQUEST_COUNT: Kind = kind(
    "APIRequestCount",
    "apiserver.openshift.io",
    "v1",
    "apirequestcounts",
);
/// Two ConfigMaps by name: the CVO's admin gates and the administrator's
/// acks. The view keeps only these, and a must-gather's ConfigMaps are
/// read only in their namespaces.
pub const CONFIG_MAP: Kind = Kind {
    listings: &[
        Listing {
            namespace: Some("openshift-config-managed"),
            fields: Some("metadata.name=admin-gates"),
        },
        Listing {
            namespace: Some("openshift-config"),
            fields: Some("metadata.name=admin-acks"),
        },
    ],
    ..kind("ConfigMap", "", "v1", "configmaps")
};
/// Serving certificates only; listed live only when an administrator opts
/// in (`cluster::live::Reads`).
pub const SECRET: Kind = Kind {
    listings: &[Listing {
        namespace: None,
        fields: Some("type=kubernetes.io/tls"),
    }],
    ..kind("Secret", "", "v1", "secrets")
};
/// The ingress operator's controllers, in its own namespace.
pub const INGRESS_CONTROLLER: Kind = Kind {
    listings: &[Listing {
        namespace: Some("openshift-ingress-operator"),
        fields: None,
    }],
    ..kind(
        "IngressController",
        "operator.openshift.io",
        "v1",
        "ingresscontrollers",
    )
};
pub const CLUSTER_SERVICE_VERSION: Kind = kind(
    "ClusterServiceVersion",
    "operators.coreos.com",
    "v1alpha1",
    "clusterserviceversions",
);

/// Every kind the gate reads.
pub const ALL: &[Kind] = &[
    CLUSTER_VERSION,
    CLUSTER_OPERATOR,
    INFRASTRUCTURE,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    MACHINE_CONFIG_POOL,
    MACHINE_CONFIG_NODE,
    API_REQUEST_COUNT,
    CONFIG_MAP,
    SECRET,
    INGRESS_CONTROLLER,
    CLUSTER_SERVICE_VERSION,
];

impl Kind {
    /// Whether an object in `api_version` (`group/version`, or `version`
    /// for the core group) is of this kind.
    pub fn reads(&self, api_version: &str) -> bool {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        group == self.group && (version == self.version || self.older.contains(&version))
    }

    /// The group folder of a must-gather (`core` for the core group).
    pub fn must_gather_group(&self) -> &'static str {
        if self.group.is_empty() {
            "core"
        } else {
            self.group
        }
    }
}

/// Every list the live reader makes, kind by kind.
pub fn listings() -> impl Iterator<Item = (&'static Kind, &'static Listing)> {
    ALL.iter()
        .flat_map(|kind| kind.listings.iter().map(move |listing| (kind, listing)))
}

/// The kind named `name`.
pub fn named(name: &str) -> Option<&'static Kind> {
    ALL.iter().find(|k| k.name == name)
}

/// The kind the view keeps for an object of `kind` in `api_version`, if it
/// keeps it. An object that names no API version (a hand-written
/// snapshot) is taken by its kind.
pub fn kept(kind: &str, api_version: Option<&str>) -> Option<&'static Kind> {
    named(kind).filter(|k| api_version.is_none_or(|v| k.reads(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("Node", "v1", true)]
    #[case("Node", "config.openshift.io/v1", false)]
    #[case("PodDisruptionBudget", "policy/v1beta1", true)]
    #[case("PodDisruptionBudget", "policy/v2", false)]
    #[case("ClusterVersion", "config.openshift.io/v1", true)]
    #[case("ClusterVersion", "v1", false)]
    #[case("MachineConfigNode", "machineconfiguration.openshift.io/v1", true)]
    #[case(
        "MachineConfigNode",
        "machineconfiguration.openshift.io/v1alpha1",
        true
    )]
    fn a_kind_is_read_in_its_group_and_versions(
        #[case] name: &str,
        #[case] api_version: &str,
        #[case] reads: bool,
    ) {
        assert_eq!(named(name).unwrap().reads(api_version), reads);
    }

    #[test]
    fn the_config_maps_are_named_by_their_listings() {
        let named: Vec<(Option<&str>, Option<&str>)> = CONFIG_MAP
            .listings
            .iter()
            .map(|l| (l.namespace, l.name()))
            .collect();
        assert_eq!(
            named,
            [
                (Some("openshift-config-managed"), Some("admin-gates")),
                (Some("openshift-config"), Some("admin-acks")),
            ]
        );
        assert_eq!(POD.listings[0].name(), None);
    }

    #[test]
    fn each_kind_is_named_once() {
        let mut names: Vec<&str> = ALL.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }
}
