//! Text for a person at a terminal, from anywhere in the gate: pure
//! helpers with no dependency on the rest of the crate, so every layer (the
//! decision, the cluster adapters, the report) may use them.

use std::fmt::Write;

use jiff::Timestamp;

/// Text that came from the cluster or a check, made safe for a terminal:
/// control characters (C0, DEL, C1: escape sequences, carriage returns,
/// line breaks) become spaces, runs of white space one space, and past
/// `max_chars` the rest is cut, saying how much.
pub fn clean(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars + 32));
    let mut kept = 0usize;
    let mut cut = 0usize;
    // Starting as if after a space drops leading white space.
    let mut space = true;
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && space {
            continue;
        }
        space = c == ' ';
        if kept < max_chars {
            out.push(c);
            kept += 1;
        } else {
            cut += 1;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    if cut > 0 {
        let _ = write!(out, "… ({cut} more characters cut)");
    }
    out
}

/// Lists names for a message: `a, b, c and 4 more`. A finding that says
/// so keeps the whole list too (`Finding::with_items`), for programs.
pub fn list(names: &[String], max: usize) -> String {
    let shown = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        format!("{shown} and {} more", names.len() - max)
    } else {
        shown
    }
}

/// How much of an operator's message a finding quotes.
pub(crate) const EXCERPT: usize = 240;

/// The first line of `message`, cut to about `max` characters on a word
/// boundary: operators' messages can run to pages.
pub(crate) fn excerpt(message: Option<&str>, max: usize) -> String {
    let line = message
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("no message");
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max).collect();
    let ends_a_word = line.chars().nth(max).is_some_and(char::is_whitespace);
    let cut = match cut.rsplit_once(' ') {
        Some((head, _)) if !ends_a_word => head,
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([',', ';', ':']))
}

/// `3h12m` since `then`.
pub fn since(then: Option<Timestamp>, now: Timestamp) -> String {
    match then {
        Some(then) => short_duration(now.duration_since(then).unsigned_abs()),
        None => "an unknown time".to_owned(),
    }
}

/// A duration as a person reads it: `42s`, `5m`, `3h12m`, `2d4h`.
pub(crate) fn short_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h{}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{}h", secs / 86400, secs % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::{clean, excerpt};
    use rstest::rstest;

    #[test]
    fn control_characters_and_runs_of_space_become_one_space() {
        assert_eq!(
            clean("\u{1b}[2J  ALL\r\n\tCHECKS\u{9b}PASSED \u{7f}", 100),
            "[2J ALL CHECKS PASSED"
        );
    }

    #[test]
    fn past_the_limit_the_rest_is_cut_and_counted() {
        assert_eq!(clean("abcdef", 4), "abcd… (2 more characters cut)");
        assert_eq!(clean("ééééé", 5), "ééééé");
        assert_eq!(clean("", 5), "");
    }

    #[rstest]
    #[case(Some("short"), "short")]
    #[case(Some("\nfirst line\nsecond"), "first line")]
    #[case(None, "no message")]
    #[case(Some("aaaa bbbb, cccc dddd"), "aaaa bbbb…")]
    #[case(Some("ééééééééééééééé"), "éééééééééé…")]
    fn excerpts(#[case] message: Option<&str>, #[case] expected: &str) {
        assert_eq!(excerpt(message, 10), expected);
    }
}
