//! Text for a person at a terminal, from anywhere in the gate: pure
//! helpers with no dependency on the rest of the crate, so every layer (the
//! decision, the cluster adapters, the report) may use them.

use std::fmt::Write;

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

#[cfg(test)]
mod tests {
    use super::clean;

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
}
