//! Text for a person at a terminal, from anywhere in the gate: pure
//! helpers with no dependency on the rest of the crate, so every layer (the
//! decision, the cluster adapters, the report) may use them.

use std::fmt::Write;

use jiff::Timestamp;

/// Whether `c` is a Unicode format character (general category Cf, as of
/// Unicode 16): bidi embeddings, overrides and isolates (U+202A–U+202E,
/// U+2066–U+2069), zero-width characters (U+200B–U+200D, U+2060, U+FEFF),
/// the soft hyphen, tags. They are invisible, and the bidi ones reorder
/// what a terminal shows, so text that reaches one loses them.
pub fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// `text` without its format characters ([`is_format`]), everything else
/// as it is (line breaks included).
pub fn strip_format(text: &str) -> String {
    text.chars().filter(|c| !is_format(*c)).collect()
}

/// Text that came from the cluster or a check, made safe for a terminal:
/// format characters ([`is_format`]: bidi overrides, zero-width ones) are
/// dropped, control characters (C0, DEL, C1: escape sequences, carriage
/// returns, line breaks) become spaces, runs of white space one space, and
/// past `max_chars` the rest is cut, saying how much.
pub fn clean(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars + 32));
    let mut kept = 0usize;
    let mut cut = 0usize;
    // Starting as if after a space drops leading white space.
    let mut space = true;
    for c in text.chars().filter(|c| !is_format(*c)) {
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

/// Text as it may be stored, where it enters the gate (a check's message):
/// format characters and control characters dropped but for line breaks
/// (a tab is a space), at most `max_chars`, saying how much was cut. What
/// prints it later cleans it again for its own line.
pub fn entered(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars + 32));
    let mut cut = 0usize;
    let kept = text
        .chars()
        .filter(|c| !is_format(*c))
        .filter_map(|c| match c {
            '\n' => Some('\n'),
            '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        });
    for (i, c) in kept.enumerate() {
        if i < max_chars {
            out.push(c);
        } else {
            cut += 1;
        }
    }
    if cut > 0 {
        let _ = write!(out, "… ({cut} more characters cut)");
    }
    out
}

/// A link as it may be stored: an `http` or `https` URL with a host and
/// no credentials, in the form it parses to (so nothing in it is left for
/// a terminal or a browser to read otherwise), or why not.
pub fn http_link(text: &str) -> Result<String, String> {
    let parsed = url::Url::parse(text.trim()).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("a {} link, not http(s)", parsed.scheme()));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("a link without a host".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a link carrying credentials".to_owned());
    }
    Ok(parsed.into())
}

/// Bytes in lower-case hex, two digits each (digests, signatures).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// The first line of `message`, without format characters ([`is_format`]),
/// cut to about `max` characters on a word boundary: operators' messages
/// can run to pages.
pub(crate) fn excerpt(message: Option<&str>, max: usize) -> String {
    let message = message.map(strip_format);
    let line = message
        .as_deref()
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

/// `value` as one word of a shell command to copy: first made safe for a
/// terminal ([`clean`]), then quoted where the shell would read anything
/// in it (`$`, quotes, back quotes, spaces, `;`...); a plain word such as
/// `4.15.3` or `NodesReady` stays as it is.
pub fn shell_word(value: &str) -> String {
    quoted(&clean(value, 512))
}

/// `value`, cleaned, as one shell word. `clean` leaves no NUL, the one
/// thing `shlex` cannot quote; an empty word, should it ever fail, is
/// still one harmless argument.
fn quoted(value: &str) -> String {
    shlex::try_quote(value).map_or_else(|_| "''".to_owned(), |q| q.into_owned())
}

/// A time as messages give it: to the second, in RFC 3339.
pub fn at(time: jiff::Timestamp) -> String {
    time.round(jiff::Unit::Second).unwrap_or(time).to_string()
}

/// `value` as JSON, one word of a shell command: cleaned and quoted as
/// [`shell_word`], but never cut, which would leave no JSON.
pub fn shell_json(value: &impl serde::Serialize) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    quoted(&clean(&json, json.chars().count()))
}

/// Names as one word of a shell command, comma-separated (`A,B,'C;D'`):
/// each quoted as [`shell_word`] quotes it, so plain names stay readable.
/// A comma outside braces is no special character, and `shlex` quotes any
/// brace, so the pieces join into a single argument.
pub fn shell_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| shell_word(n))
        .collect::<Vec<_>>()
        .join(",")
}

/// A name for a message that may not be what it claims to be: visible
/// ASCII as it is, anything else (control and format characters, other
/// scripts) escaped as `\u{202e}`, in double quotes, cut to `max_chars`.
pub fn escaped(text: &str, max_chars: usize) -> String {
    let mut out = String::from("\"");
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out.push('"');
    out
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

/// An error and its causes, each said once: `cannot read x: No such file
/// or directory (os error 2)`. An error's own message names what failed;
/// its cause is its source, never also in its message.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        said.push_str(": ");
        said.push_str(&e.to_string());
        cause = e.source();
    }
    said
}

#[cfg(test)]
mod chain_tests {
    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read {path}")]
        struct Read {
            path: &'static str,
            source: std::io::Error,
        }
        let e = Read {
            path: "/nope",
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert_eq!(super::chain(&e), "cannot read /nope: entity not found");
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
