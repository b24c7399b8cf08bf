//! Label selectors (`matchLabels` and `matchExpressions`), as PDBs and
//! MachineConfigPools use them.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(deserialize_with = "super::openshift::null_as_default")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "super::openshift::null_as_default")]
    pub match_expressions: Vec<Requirement>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    #[serde(deserialize_with = "super::openshift::null_as_default")]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether the selector selects nothing at all (`{}` selects everything
    /// for a PDB; callers decide what an empty selector means).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy every term. An unknown operator matches
    /// nothing, as the API server would have refused it.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[rstest]
    #[case(r#"{"matchLabels":{"app":"db"}}"#, &[("app", "db")], true)]
    #[case(r#"{"matchLabels":{"app":"db"}}"#, &[("app", "web")], false)]
    #[case(r#"{"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]}]}"#, &[("tier", "b")], true)]
    #[case(r#"{"matchExpressions":[{"key":"tier","operator":"NotIn","values":["a"]}]}"#, &[], true)]
    #[case(r#"{"matchExpressions":[{"key":"tier","operator":"Exists"}]}"#, &[], false)]
    #[case(r#"{"matchExpressions":[{"key":"tier","operator":"DoesNotExist"}]}"#, &[], true)]
    #[case(r#"{"matchExpressions":[{"key":"tier","operator":"Near"}]}"#, &[("tier", "x")], false)]
    #[case(r#"{}"#, &[("any", "thing")], true)]
    fn selectors(#[case] selector: &str, #[case] pod: &[(&str, &str)], #[case] expected: bool) {
        let selector: LabelSelector = serde_json::from_str(selector).unwrap();
        assert_eq!(selector.matches(&labels(pod)), expected);
    }
}
