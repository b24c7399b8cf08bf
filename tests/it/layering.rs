//! The structure the imports keep, held against `docs/ARCHITECTURE.md`:
//! its `layers` block names the top-level modules from the top floor down,
//! and its `pure` block the modules that must stay free of runtime. Every
//! source file is parsed (syn) for the paths it names.
//!
//! - A module names only modules on floors below its own.
//! - No two source files import each other, directly or round a loop (a
//!   file naming its own folder's `mod.rs` is a child using its parent).
//! - The pure modules name no API client, no async runtime, no HTTP, no
//!   threads, no files, no clock, and no impure module of the crate.

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

fn files() -> Vec<File> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = root().join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
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
    resolved: BTreeSet<Vec<String>>,
    written: BTreeSet<Vec<String>>,
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
        self.inline += 1;
        syn::visit::visit_item_mod(self, item);
        self.inline -= 1;
    }

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
];
const CLOCKS: &[&str] = &[
    "Timestamp",
    "Zoned",
    "SystemTime",
    "Instant",
    "Utc",
    "Local",
];

#[test]
fn the_pure_modules_have_no_runtime_and_no_clock() {
    let pure: BTreeSet<String> = block("pure")
        .iter()
        .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert!(
        !pure.is_empty(),
        "docs/ARCHITECTURE.md names no pure module"
    );
    let modules = floors();
    let mut broken = Vec::new();
    for file in files().iter().filter(|f| pure.contains(&f.module[0])) {
        let names = names(file);
        // A pure module that names an impure module of the crate is no
        // purer than that module.
        for path in &names.resolved {
            if let Some(other) = path.first()
                && modules.contains_key(other)
                && !pure.contains(other)
            {
                broken.push(format!(
                    "{} names the impure module {}",
                    display(&file.path),
                    path.join("::")
                ));
            }
        }
        for path in &names.written {
            let runtime = RUNTIME
                .iter()
                .any(|r| path.starts_with(&r.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
            let clock = path.len() >= 2
                && path[path.len() - 1] == "now"
                && CLOCKS.contains(&path[path.len() - 2].as_str());
            if runtime || clock {
                broken.push(format!("{} names {}", display(&file.path), path.join("::")));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import_and_a_clock() {
    // The rules above are only as good as what they read: a file that
    // breaks each is caught.
    let syntax = syn::parse_file(
        "use super::super::server::Gate; fn f() { let _ = jiff::Timestamp::now(); tokio::spawn(async {}); }",
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
