//! Kubernetes resource quantities (`500m`, `2`, `16Gi`, `1.5e3`) as plain
//! integers: CPU in millicores, memory in bytes.

use serde::{Deserialize, Deserializer};

/// Requests or allocatable resources of a pod or node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

impl std::ops::Add for Resources {
    type Output = Self;

    /// Saturating: quantities from a snapshot are not trusted.
    fn add(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
        }
    }
}

impl Resources {
    pub fn max(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
        }
    }

    pub fn saturating_sub(self, other: Self) -> Self {
        Self {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
        }
    }

    /// Whether both resources of `self` cover those of `need`.
    pub fn covers(self, need: Self) -> bool {
        self.cpu_millis >= need.cpu_millis && self.memory_bytes >= need.memory_bytes
    }
}

impl std::fmt::Display for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gib = self.memory_bytes as f64 / (1u64 << 30) as f64;
        write!(f, "{}m CPU, {gib:.1}Gi memory", self.cpu_millis)
    }
}

/// A quantity as written: a string, or a bare number in hand-written YAML.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Text(String),
    Number(f64),
}

/// Parses a quantity into the unit given by `scale` (1000 for
/// millicores, 1 for bytes). Returns `None` for text that is not a quantity.
pub fn parse(text: &str, scale: f64) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    let value = (number * factor * scale).ceil();
    (value.is_finite() && value >= 0.0).then_some(value as u64)
}

/// Reads `cpu` and `memory` out of a `requests` or `allocatable` map.
pub(crate) fn deserialize_resources<'de, D>(deserializer: D) -> Result<Resources, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Map {
        cpu: Option<Written>,
        memory: Option<Written>,
    }
    let map = Option::<Map>::deserialize(deserializer)?.unwrap_or_default();
    let read = |q: Option<Written>, scale: f64| -> Result<u64, D::Error> {
        match q {
            None => Ok(0),
            Some(Written::Number(n)) => Ok((n * scale).ceil().max(0.0) as u64),
            Some(Written::Text(t)) => parse(&t, scale)
                .ok_or_else(|| serde::de::Error::custom(format!("{t:?} is not a quantity"))),
        }
    };
    Ok(Resources {
        cpu_millis: read(map.cpu, 1000.0)?,
        memory_bytes: read(map.memory, 1.0)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("500m", 1000.0, Some(500))]
    #[case("2", 1000.0, Some(2000))]
    #[case("0.25", 1000.0, Some(250))]
    #[case("16Gi", 1.0, Some(17_179_869_184))]
    #[case("128974848", 1.0, Some(128_974_848))]
    #[case("129M", 1.0, Some(129_000_000))]
    #[case("1e3", 1.0, Some(1000))]
    #[case("12Qi", 1.0, None)]
    #[case("lots", 1.0, None)]
    fn quantities(#[case] text: &str, #[case] scale: f64, #[case] expected: Option<u64>) {
        assert_eq!(parse(text, scale), expected);
    }
}
