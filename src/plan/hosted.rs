//! A NodePool's rollout, as HyperShift updates it by its `upgradeType`:
//! how many machines change at once and in how many waves, pure
//! arithmetic over its replicas and its `maxSurge` / `maxUnavailable`
//! (their defaults and rounding are the NodePool CRD's). How long a wave
//! takes is another matter: `Replace` waits on the cloud for new machines,
//! which no data here tells; `InPlace` drains and updates each node as the
//! MCO does.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::pools::scaled;
use crate::model::hosted::NodePool;

/// How a NodePool's machines are updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UpgradeType {
    /// New machines replace the old, `maxSurge` above and
    /// `maxUnavailable` below the desired count.
    Replace,
    /// The machines are drained and updated where they are,
    /// `maxUnavailable` at a time.
    InPlace,
}

/// A NodePool's rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    pub upgrade_type: UpgradeType,
    pub replicas: usize,
    /// Machines made above the desired count at once (`Replace` only).
    pub surge: usize,
    /// Machines unavailable at once.
    pub unavailable: usize,
    /// Machines that change in one wave.
    pub at_once: usize,
    /// Waves until every machine has changed.
    pub waves: usize,
}

/// The rollout of `pool`, or why its settings cannot roll it out (as the
/// NodePool's controller refuses them).
pub fn rollout(pool: &NodePool) -> Result<Rollout, String> {
    let replicas = pool.spec.replicas.unwrap_or(0) as usize;
    let management = &pool.spec.management;
    let (upgrade_type, surge, unavailable) = match management.upgrade_type.as_str() {
        "InPlace" => {
            let given = management
                .in_place
                .as_ref()
                .and_then(|p| p.max_unavailable.as_ref());
            let unavailable = match given {
                Some(given) => scaled("maxUnavailable", given, replicas, false)?,
                None => 1,
            };
            (UpgradeType::InPlace, 0, unavailable.max(1))
        }
        "Replace" | "" => {
            let rolling = management
                .replace
                .as_ref()
                .and_then(|r| r.rolling_update.as_ref());
            let surge = rolling.and_then(|r| r.max_surge.as_ref());
            let unavailable = rolling.and_then(|r| r.max_unavailable.as_ref());
            let surge = scaled(
                "maxSurge",
                surge.unwrap_or(&IntOrString::Int(1)),
                replicas,
                true,
            )?;
            let unavailable = scaled(
                "maxUnavailable",
                unavailable.unwrap_or(&IntOrString::Int(0)),
                replicas,
                false,
            )?;
            if surge == 0 && unavailable == 0 {
                return Err(
                    "maxSurge and maxUnavailable are both 0: no machine can be replaced".to_owned(),
                );
            }
            (UpgradeType::Replace, surge, unavailable)
        }
        other => {
            return Err(format!(
                "upgradeType {other:?} is neither Replace nor InPlace"
            ));
        }
    };
    let at_once = surge + unavailable;
    Ok(Rollout {
        upgrade_type,
        replicas,
        surge,
        unavailable,
        at_once,
        waves: replicas.div_ceil(at_once),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn pool(replicas: u32, management: Value) -> NodePool {
        serde_json::from_value(json!({
            "metadata": {"name": "workers", "namespace": "clusters"},
            "spec": {"clusterName": "prod", "replicas": replicas, "management": management}
        }))
        .unwrap()
    }

    #[rstest]
    #[case::replace_defaults(10, json!({"upgradeType": "Replace"}), UpgradeType::Replace, 1, 0, 10)]
    #[case::replace_surge_percent_rounds_up(10, json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}}), UpgradeType::Replace, 3, 0, 4)]
    #[case::replace_unavailable_percent_rounds_down(10, json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}}), UpgradeType::Replace, 0, 2, 5)]
    #[case::in_place_defaults(7, json!({"upgradeType": "InPlace"}), UpgradeType::InPlace, 0, 1, 7)]
    #[case::in_place_count(7, json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": 3}}), UpgradeType::InPlace, 0, 3, 3)]
    #[case::in_place_small_percent_is_one(7, json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": "10%"}}), UpgradeType::InPlace, 0, 1, 7)]
    #[case::no_replicas(0, json!({"upgradeType": "Replace"}), UpgradeType::Replace, 1, 0, 0)]
    fn a_nodepool_rolls_out_in_waves(
        #[case] replicas: u32,
        #[case] management: Value,
        #[case] upgrade_type: UpgradeType,
        #[case] surge: usize,
        #[case] unavailable: usize,
        #[case] waves: usize,
    ) {
        let r = rollout(&pool(replicas, management)).unwrap();
        assert_eq!(
            (r.upgrade_type, r.surge, r.unavailable, r.waves),
            (upgrade_type, surge, unavailable, waves),
            "{r:?}"
        );
        assert_eq!(r.at_once, surge + unavailable);
    }

    #[rstest]
    #[case::both_zero(json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}), "both 0")]
    #[case::negative(json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": -1}}), "maxUnavailable -1 is negative")]
    #[case::words(json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": "a few"}}}), "maxSurge \"a few\" is neither")]
    #[case::other_type(json!({"upgradeType": "Recreate"}), "neither Replace nor InPlace")]
    fn settings_that_cannot_roll_out_say_why(#[case] management: Value, #[case] says: &str) {
        let err = rollout(&pool(3, management)).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}
