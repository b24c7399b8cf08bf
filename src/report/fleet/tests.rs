use super::*;

fn blocked(name: &str, blockers: &[(&str, &[&str])]) -> Cluster {
    Cluster {
        name: name.to_owned(),
        cluster_id: Some(name.to_owned()),
        from: format!("snapshots/{name}"),
        verdict: Verdict::Blocked,
        check_verdict: Some("Blocked"),
        current: Some("4.14.1".to_owned()),
        blocking: blockers
            .iter()
            .map(|(check, names)| Blocker {
                check: (*check).to_owned(),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                message: "first line".to_owned(),
            })
            .collect(),
        plan: None,
        error: None,
        full_plan: None,
    }
}

/// Names of one check that block the same clusters are one cause; the
/// causes blocking most clusters come first.
#[test]
fn causes_are_grouped_by_check_and_name_and_counted() {
    let clusters = [
        blocked(
            "a",
            &[(
                "PrecheckAlertsFiring",
                &["KubeContainerWaiting", "KubePodCrashLooping"],
            )],
        ),
        blocked(
            "b",
            &[
                ("OLMOperatorsCompatible", &[]),
                (
                    "PrecheckAlertsFiring",
                    &["KubeContainerWaiting", "KubePodCrashLooping"],
                ),
            ],
        ),
        blocked(
            "c",
            &[
                ("PrecheckAlertsFiring", &["KubeContainerWaiting"]),
                ("OLMOperatorsCompatible", &[]),
            ],
        ),
    ];
    let causes = causes(&clusters);
    let shown: Vec<(String, usize, Vec<String>)> = causes
        .iter()
        .map(|c| (c.title(), c.count, c.clusters.clone()))
        .collect();
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        shown,
        [
            (
                "PrecheckAlertsFiring [KubeContainerWaiting]".to_owned(),
                3,
                names(&["a", "b", "c"])
            ),
            ("OLMOperatorsCompatible".to_owned(), 2, names(&["b", "c"])),
            (
                "PrecheckAlertsFiring [KubePodCrashLooping]".to_owned(),
                2,
                names(&["a", "b"])
            ),
        ]
    );
}

#[test]
fn the_exit_code_is_blocked_first_then_unjudged() {
    let fleet = |clusters: Vec<Cluster>| {
        let mut f = Fleet {
            schema_version: SCHEMA_VERSION,
            target: "4.14.12".to_owned(),
            summary: Counts::default(),
            causes: causes(&clusters),
            clusters,
        };
        for c in &f.clusters {
            match c.verdict {
                Verdict::Cleared => f.summary.cleared += 1,
                Verdict::Blocked => f.summary.blocked += 1,
                Verdict::Error => f.summary.errors += 1,
            }
        }
        f
    };
    let mut error = blocked("x", &[]);
    error.verdict = Verdict::Error;
    let mut cleared = blocked("y", &[]);
    cleared.verdict = Verdict::Cleared;
    assert_eq!(fleet(vec![cleared.clone()]).exit_code(), 0);
    assert_eq!(fleet(vec![cleared.clone(), error.clone()]).exit_code(), 1);
    assert_eq!(
        fleet(vec![cleared, error, blocked("z", &[("A", &[])])]).exit_code(),
        3
    );
}

/// Every string of the data is escaped, in text and in attributes alike.
#[test]
fn the_page_escapes_what_the_data_says() {
    assert_eq!(
        html::esc(r#"<a href="x">'&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;&#x2F;a&gt;"
    );
    let mut evil = blocked("<script>alert(1)</script>", &[("Check\"'&", &["<b>"])]);
    evil.from = "dir/\"><img src=x>".to_owned();
    let page = html::page(&Fleet {
        schema_version: SCHEMA_VERSION,
        target: "4.14.12<i>".to_owned(),
        summary: Counts {
            clusters: 1,
            blocked: 1,
            ..Counts::default()
        },
        causes: causes(std::slice::from_ref(&evil)),
        clusters: vec![evil],
    });
    for raw in ["<script", "<img", "<b>", "<i>", "Check\"", "'&'"] {
        assert!(!page.contains(raw), "{raw} is not escaped:\n{page}");
    }
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;&#x2F;script&gt;"),
        "{page}"
    );
    for outside in ["<script", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(!page.contains(outside), "{outside}: the page stands alone");
    }
}
