//! The structure the imports keep, held against `docs/ARCHITECTURE.md`:
//! its `layers` block names the top-level modules from the top floor down,
//! and its `pure` block the modules that must stay free of runtime. Every
//! source file is parsed (syn) for the paths it names.
//!
//! - A module names only modules on floors below its own.
//! - No two source files import each other, directly or round a loop (a
//!   file naming its own folder's `mod.rs` is a child using its parent).
//! - The pure modules, and the pure files of other modules, name no API
//!   client, no async runtime, no HTTP, no threads, no files, no clock, no
//!   environment, no shared mutable state (a lock) outside their tests,
//!   and no impure file of the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the fenced block tagged `tag` in ARCHITECTURE.md.
fn block(tag: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let fence = format!("```{tag}");
    let start = doc
        .find(&fence)
        .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md has no {fence} block"));
    doc[start + fence.len()..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| l.split('#').next().unwrap().trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Floor of each top-level module: 0 is the ground.
fn floors() -> BTreeMap<String, usize> {
    let lines = block("layers");
    let top = lines.len();
    lines
        .iter()
        .enumerate()
        .flat_map(|(i, line)| {
            line.split_whitespace()
                .map(move |m| (m.to_owned(), top - 1 - i))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A source file and the module path it defines (`["preflight", "jobs"]`).
struct File {
    path: PathBuf,
    module: Vec<String>,
    syntax: syn::File,
}

/// Every Rust file under `dir`, at any depth, added to `out`.
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files() -> Vec<File> {
    let src = root().join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter(|p| !p.ends_with("lib.rs") && !p.ends_with("main.rs"))
        .map(|path| {
            let rel = path.strip_prefix(&src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let syntax =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            File {
                path,
                module,
                syntax,
            }
        })
        .collect()
}

/// Every path a file names, as segments, resolved to start at the crate
/// (`crate::`, `super::`, `self::` and `use` trees), and every other path
/// as written (`tokio::spawn`, `Timestamp::now`).
#[derive(Default)]
struct Names {
    /// The file's own module, and whether it is a folder's `mod.rs`.
    here: Vec<String>,
    /// Inline modules (`mod tests { .. }`) the visitor is inside: a
    /// `super` there goes up to the file's own module first.
    inline: usize,
    /// `#[cfg(test)]` modules the visitor is inside.
    tests: usize,
    resolved: BTreeSet<Vec<String>>,
    written: BTreeSet<Vec<String>>,
    /// The written paths outside `#[cfg(test)]` modules.
    written_outside_tests: BTreeSet<Vec<String>>,
}

impl Names {
    fn add(&mut self, segments: Vec<String>) {
        let Some(first) = segments.first() else {
            return;
        };
        // `super` in a file goes to its module's parent (a mod.rs and a
        // leaf file alike).
        let base = self.here.clone();
        let resolved = match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some([&base[..], &segments[1..]].concat()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let keep = base.len().saturating_sub(ups.saturating_sub(self.inline));
                Some([&base[..keep], &segments[ups..]].concat())
            }
            _ => None,
        };
        match resolved {
            Some(path) => {
                self.resolved.insert(path);
            }
            None => {
                if self.tests == 0 {
                    self.written_outside_tests.insert(segments.clone());
                }
                self.written.insert(segments);
            }
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.add(prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.add(prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let test = usize::from(cfg_test(&item.attrs));
        self.inline += 1;
        self.tests += test;
        syn::visit::visit_item_mod(self, item);
        self.tests -= test;
        self.inline -= 1;
    }

    /// `pub(super)` and `pub(in path)` say who may see an item: they
    /// name no module's contents.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Paths inside macro calls (`format!`, `json!`) are tokens, not
        // syntax: read those that spell a crate path.
        let tokens: Vec<String> = mac
            .tokens
            .clone()
            .into_iter()
            .map(|t| t.to_string())
            .collect();
        for (i, token) in tokens.iter().enumerate() {
            if matches!(token.as_str(), "crate" | "tokio" | "axum" | "kube")
                && tokens.get(i + 1).is_some_and(|t| t == ":")
            {
                let mut segments = vec![token.clone()];
                let mut j = i + 1;
                while tokens.get(j).is_some_and(|t| t == ":")
                    && tokens.get(j + 1).is_some_and(|t| t == ":")
                {
                    match tokens.get(j + 2) {
                        Some(next) if next.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                            segments.push(next.clone());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                self.add(segments);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// Whether the attributes hold `#[cfg(test)]`.
fn cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

/// The modules that are test code as a whole: those a file declares
/// `#[cfg(test)] mod name;`, and their children.
fn test_modules(files: &[File]) -> BTreeSet<Vec<String>> {
    files
        .iter()
        .flat_map(|file| {
            file.syntax.items.iter().filter_map(|item| match item {
                syn::Item::Mod(m) if m.content.is_none() && cfg_test(&m.attrs) => {
                    Some([&file.module[..], &[m.ident.to_string()]].concat())
                }
                _ => None,
            })
        })
        .collect()
}

fn names(file: &File) -> Names {
    let mut names = Names {
        here: file.module.clone(),
        ..Names::default()
    };
    names.visit_file(&file.syntax);
    names
}

fn display(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

#[test]
fn no_module_names_one_on_a_floor_above_or_beside_it() {
    let floors = floors();
    let files = files();
    let mut broken = Vec::new();
    for file in &files {
        let top = &file.module[0];
        let floor = *floors
            .get(top)
            .unwrap_or_else(|| panic!("src/{top} is on no floor of docs/ARCHITECTURE.md"));
        for path in names(file).resolved {
            let Some(other) = path.first().filter(|o| *o != top) else {
                continue;
            };
            match floors.get(other) {
                Some(&theirs) if theirs < floor => {}
                Some(_) => broken.push(format!(
                    "{} ({top}) names {} ({other}), which is not below it",
                    display(&file.path),
                    path.join("::")
                )),
                // A name of the crate's root (a macro, a re-export) is no
                // module.
                None => {}
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn no_source_files_import_each_other_round_a_loop() {
    let files = files();
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    // Each named path goes to the file of its longest module prefix.
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (i, file) in files.iter().enumerate() {
        for path in names(file).resolved {
            let target = (1..=path.len())
                .rev()
                .find_map(|n| modules.get(&path[..n]).copied());
            let Some(target) = target else { continue };
            let to = &files[target].module;
            // A file naming its own folder (or an ancestor's) mod.rs uses
            // what its parent declares: no import of another file.
            let ancestor = to.len() < file.module.len() && file.module.starts_with(to);
            if target != i && !ancestor {
                edges[i].insert(target);
            }
        }
    }
    // Tarjan would name every loop; one is enough to fail on.
    fn visit(
        n: usize,
        edges: &[BTreeSet<usize>],
        state: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[n] = 1;
        stack.push(n);
        for &m in &edges[n] {
            if state[m] == 1 {
                let at = stack.iter().position(|&s| s == m).unwrap();
                return Some(stack[at..].to_vec());
            }
            if state[m] == 0
                && let Some(cycle) = visit(m, edges, state, stack)
            {
                return Some(cycle);
            }
        }
        stack.pop();
        state[n] = 2;
        None
    }
    let mut state = vec![0u8; files.len()];
    for n in 0..files.len() {
        if state[n] == 0
            && let Some(cycle) = visit(n, &edges, &mut state, &mut Vec::new())
        {
            let names: Vec<String> = cycle.iter().map(|&i| display(&files[i].path)).collect();
            panic!(
                "these files import each other round a loop: {}",
                names.join(" -> ")
            );
        }
    }
}

/// What a pure module may not name: the first segments of a path, or a
/// path's last two.
const RUNTIME: &[&[&str]] = &[
    &["tokio"],
    &["axum"],
    &["hyper"],
    &["reqwest"],
    &["tower"],
    &["kube", "Client"],
    &["kube", "Api"],
    &["kube", "api"],
    &["kube", "runtime"],
    &["kube", "client"],
    &["std", "thread"],
    &["std", "fs"],
    &["std", "net"],
    &["std", "process"],
    &["std", "env"],
];
const CLOCKS: &[&str] = &[
    "Timestamp",
    "Zoned",
    "SystemTime",
    "Instant",
    "Utc",
    "Local",
];
/// Shared mutable state: a lock or an atomic (a `OnceLock` or `LazyLock`
/// holds such state only through one of these), named anywhere in a path.
/// A pure module's tests may hold a lock (a test double behind a port that
/// must be `Sync`).
const LOCKS: &[&str] = &["Mutex", "RwLock", "ReentrantLock", "parking_lot", "atomic"];

/// Shared state pure files still hold, each to move up to the runtime as
/// `ResultCache` did (`preflight::result_cache`): the file and the lock it
/// names. The test fails once one no longer does, so the list only shrinks.
const STATE_STILL_HELD: &[(&str, &str)] = &[
    // The run requests counted per requester.
    ("src/admission/run_requests.rs", "Mutex"),
    // `NewestRuns`, the newest signed run of each object.
    ("src/model/vouch.rs", "Mutex"),
];

/// What a pure file names that it may not, in words: a runtime, a clock,
/// the environment.
fn runtime_named(path: &[String]) -> bool {
    let runtime = RUNTIME
        .iter()
        .any(|r| path.starts_with(&r.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
    let clock = path.len() >= 2
        && path[path.len() - 1] == "now"
        && CLOCKS.contains(&path[path.len() - 2].as_str());
    runtime || clock
}

/// The lock a path names, if it names one.
fn lock_named(path: &[String]) -> Option<&'static str> {
    LOCKS
        .iter()
        .copied()
        .find(|lock| path.iter().any(|s| s == lock))
}

/// The pure code, as the `pure` block of ARCHITECTURE.md declares it:
/// top-level modules (`model`), whole, and single files of other modules
/// (`preflight/jobs/manifest.rs`), each a path under `src/`.
struct Pure {
    modules: BTreeSet<String>,
    files: BTreeSet<PathBuf>,
}

impl Pure {
    fn declared() -> Self {
        let (files, modules): (Vec<String>, Vec<String>) = block("pure")
            .iter()
            .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .partition(|entry| entry.ends_with(".rs"));
        let pure = Self {
            modules: modules.into_iter().collect(),
            files: files
                .into_iter()
                .map(|f| root().join("src").join(f))
                .collect(),
        };
        assert!(
            !pure.modules.is_empty(),
            "docs/ARCHITECTURE.md names no pure module"
        );
        for file in &pure.files {
            assert!(
                file.is_file(),
                "docs/ARCHITECTURE.md declares {} pure, and there is no such file",
                display(file)
            );
        }
        pure
    }

    fn holds(&self, file: &File) -> bool {
        self.modules.contains(&file.module[0]) || self.files.contains(&file.path)
    }
}

#[test]
fn the_pure_modules_have_no_runtime_no_clock_and_no_shared_state() {
    let pure = Pure::declared();
    let files = files();
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let tests = test_modules(&files);
    let mut broken = Vec::new();
    let mut still_held = BTreeSet::new();
    for file in files.iter().filter(|f| pure.holds(f)) {
        let names = names(file);
        let here = display(&file.path);
        // A pure file that names an impure file of the crate is no purer
        // than that file.
        for path in &names.resolved {
            let target = (1..=path.len())
                .rev()
                .find_map(|n| modules.get(&path[..n]).copied());
            if let Some(target) = target
                && !pure.holds(&files[target])
            {
                broken.push(format!(
                    "{here} names {}, in {}, which is not pure",
                    path.join("::"),
                    display(&files[target].path)
                ));
            }
        }
        for path in &names.written {
            if runtime_named(path) {
                broken.push(format!(
                    "{here} names {}: a pure file reads no runtime, clock or environment; its caller passes in what it needs",
                    path.join("::")
                ));
            }
        }
        if tests.iter().any(|t| file.module.starts_with(t)) {
            continue;
        }
        for path in &names.written_outside_tests {
            let Some(lock) = lock_named(path) else {
                continue;
            };
            if STATE_STILL_HELD.contains(&(here.as_str(), lock)) {
                still_held.insert((here.clone(), lock));
                continue;
            }
            broken.push(format!(
                "{here} names {}: shared mutable state, which belongs to the runtime (preflight, server), not to a pure module",
                path.join("::")
            ));
        }
    }
    for (file, lock) in STATE_STILL_HELD {
        if !still_held.contains(&(file.to_string(), *lock)) {
            broken.push(format!(
                "{file} no longer names {lock}: take it off STATE_STILL_HELD"
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import_a_clock_the_environment_and_a_lock() {
    // The rules above are only as good as what they read: a file that
    // breaks each is caught.
    let syntax = syn::parse_file(
        "use super::super::server::Gate; use std::sync::Mutex; \
         static SEEN: Mutex<u8> = Mutex::new(0); \
         fn f() { let _ = jiff::Timestamp::now(); tokio::spawn(async {}); let _ = std::env::var(\"HOME\"); } \
         #[cfg(test)] mod tests { fn double() -> std::sync::RwLock<u8> { Default::default() } }",
    )
    .unwrap();
    let file = File {
        path: root().join("src/model/probe.rs"),
        module: vec!["model".into(), "probe".into()],
        syntax,
    };
    let names = names(&file);
    assert!(
        names
            .resolved
            .contains(&vec!["server".to_owned(), "Gate".to_owned()])
    );
    assert!(
        names
            .written
            .contains(&vec!["jiff".into(), "Timestamp".into(), "now".into()])
    );
    assert!(
        names
            .written
            .contains(&vec!["tokio".into(), "spawn".into()])
    );
    assert!(runtime_named(&["std".into(), "env".into(), "var".into()]));
    let locks: Vec<&str> = names
        .written_outside_tests
        .iter()
        .filter_map(|p| lock_named(p))
        .collect();
    assert!(locks.contains(&"Mutex"), "{locks:?}");
    assert!(!locks.contains(&"RwLock"), "a test's lock is the test's");
    assert!(
        names
            .written
            .iter()
            .any(|p| lock_named(p) == Some("RwLock"))
    );
}

/// The arrows between top-level modules the code has: `a` names something
/// in `b`.
fn arrows() -> BTreeSet<(String, String)> {
    let floors = floors();
    let mut arrows = BTreeSet::new();
    for file in files() {
        let top = file.module[0].clone();
        for path in names(&file).resolved {
            if let Some(other) = path.first()
                && *other != top
                && floors.contains_key(other)
            {
                arrows.insert((top.clone(), other.clone()));
            }
        }
    }
    arrows
}

#[test]
fn the_picture_in_the_architecture_draws_every_arrow_and_no_other() {
    // `a --> b & c` lines of the mermaid block.
    let drawn: BTreeSet<(String, String)> = block("mermaid")
        .iter()
        .filter_map(|l| l.split_once("-->"))
        .flat_map(|(from, to)| {
            let from = from.trim().to_owned();
            to.split('&')
                .map(move |t| (from.clone(), t.trim().to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    let code = arrows();
    let missing: Vec<_> = code.difference(&drawn).collect();
    let extra: Vec<_> = drawn.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/ARCHITECTURE.md's picture is stale: not drawn {missing:?}; drawn but not in the code {extra:?}"
    );
}
