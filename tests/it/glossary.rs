//! One word, one meaning: the `words` block of `docs/ARCHITECTURE.md`
//! reserves its words, and every Rust file of `src/`, `tests/` and
//! `benches/` is parsed (syn) to hold the code to them, where that can be
//! checked mechanically:
//!
//! - `name: Type …`: a field, parameter or `let` of that name has one of
//!   those types (`*Error`: any type whose name ends so);
//! - `Type = name …`: a field, parameter or `let` of that type has one of
//!   those names (`name*`: any name that starts so);
//! - `item @ folder …`: a function, type or trait of that name is declared
//!   only under those folders of `src/` (or in `tests`, `benches`; `-`:
//!   nowhere; the word was retired for meaning two things).
//!
//! A binding is seen where its type is written (fields, typed parameters
//! and lets) or built (`let x = Type { .. }`, `Type::new(..)`); untyped
//! closure parameters, patterns and other calls are not judged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use crate::layering::rust_files;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reserved words, as the `words` block states them.
#[derive(Default)]
struct Words {
    types_of: BTreeMap<String, Vec<String>>,
    names_of: BTreeMap<String, Vec<String>>,
    homes_of: BTreeMap<String, Vec<String>>,
}

fn words() -> Words {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let start = doc
        .find("```words")
        .expect("docs/ARCHITECTURE.md has no ```words block");
    let mut words = Words::default();
    for line in doc[start..].lines().skip(1) {
        if line.starts_with("```") {
            break;
        }
        let line = line.split('#').next().unwrap().trim();
        let split = |sep| {
            line.split_once(sep).map(|(word, rest): (&str, &str)| {
                let rest = rest.split_whitespace().map(str::to_owned).collect();
                (word.trim().to_owned(), rest)
            })
        };
        if let Some((name, types)) = split(':') {
            words.types_of.insert(name, types);
        } else if let Some((ty, names)) = split('=') {
            words.names_of.insert(ty, names);
        } else if let Some((item, homes)) = split('@') {
            words.homes_of.insert(item, homes);
        } else if !line.is_empty() {
            panic!("the words block cannot read {line:?}");
        }
    }
    assert!(
        !words.types_of.is_empty() && !words.names_of.is_empty() && !words.homes_of.is_empty(),
        "the words block states each kind of rule"
    );
    words
}

/// Types that wrap the one a binding is about.
const SEEN_THROUGH: [&str; 7] = ["Option", "Arc", "Box", "Rc", "Vec", "Cow", "Self"];

/// The type a binding names, seen through references, smart pointers,
/// options and collections: `&dyn ResultLookup`, `Option<Arc<Source>>`
/// name `ResultLookup` and `Source`.
fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        syn::Type::TraitObject(t) => t.bounds.iter().find_map(|b| match b {
            syn::TypeParamBound::Trait(t) => t.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }),
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            let wrapper = SEEN_THROUGH.contains(&name.as_str());
            if let (true, syn::PathArguments::AngleBracketed(args)) = (wrapper, &last.arguments) {
                args.args.iter().find_map(|a| match a {
                    syn::GenericArgument::Type(t) => type_name(t),
                    _ => None,
                })
            } else {
                (name != "Self").then_some(name)
            }
        }
        _ => None,
    }
}

/// The type a `let` builds, where its value says so: `Type { .. }`,
/// `Type::new(..)`, `Type::default()`.
fn built_type(expr: &syn::Expr) -> Option<String> {
    let path = match expr {
        syn::Expr::Struct(s) => {
            let ty = s.path.segments.last()?.ident.to_string();
            return (!SEEN_THROUGH.contains(&ty.as_str())).then_some(ty);
        }
        syn::Expr::Call(call) => match &*call.func {
            syn::Expr::Path(p) => &p.path,
            _ => return None,
        },
        _ => return None,
    };
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let ty = segments.iter().rev().nth(1)?;
    let named = ty.starts_with(char::is_uppercase) && !SEEN_THROUGH.contains(&ty.as_str());
    named.then(|| ty.clone())
}

/// Each binding (name, type) and each declared item of one file.
#[derive(Default)]
struct Seen {
    bindings: Vec<(String, String)>,
    items: Vec<String>,
}

impl<'ast> Visit<'ast> for Seen {
    fn visit_pat_type(&mut self, p: &'ast syn::PatType) {
        if let (syn::Pat::Ident(name), Some(ty)) = (&*p.pat, type_name(&p.ty)) {
            self.bindings.push((name.ident.to_string(), ty));
        }
        syn::visit::visit_pat_type(self, p);
    }
    fn visit_field(&mut self, f: &'ast syn::Field) {
        if let (Some(name), Some(ty)) = (&f.ident, type_name(&f.ty)) {
            self.bindings.push((name.to_string(), ty));
        }
        syn::visit::visit_field(self, f);
    }
    fn visit_local(&mut self, l: &'ast syn::Local) {
        if let (syn::Pat::Ident(name), Some(init)) = (&l.pat, &l.init)
            && let Some(ty) = built_type(&init.expr)
        {
            self.bindings.push((name.ident.to_string(), ty));
        }
        syn::visit::visit_local(self, l);
    }
    fn visit_item_fn(&mut self, i: &'ast syn::ItemFn) {
        self.items.push(i.sig.ident.to_string());
        syn::visit::visit_item_fn(self, i);
    }
    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        self.items.push(i.sig.ident.to_string());
        syn::visit::visit_impl_item_fn(self, i);
    }
    fn visit_item_struct(&mut self, i: &'ast syn::ItemStruct) {
        self.items.push(i.ident.to_string());
        syn::visit::visit_item_struct(self, i);
    }
    fn visit_item_enum(&mut self, i: &'ast syn::ItemEnum) {
        self.items.push(i.ident.to_string());
        syn::visit::visit_item_enum(self, i);
    }
    fn visit_item_type(&mut self, i: &'ast syn::ItemType) {
        self.items.push(i.ident.to_string());
        syn::visit::visit_item_type(self, i);
    }
    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        self.items.push(i.ident.to_string());
        syn::visit::visit_item_trait(self, i);
    }
}

/// Every Rust file of `src/`, `tests/` and `benches/`, with what it binds
/// and declares, named from the repository's root.
fn sources() -> Vec<(PathBuf, Seen)> {
    let mut paths = Vec::new();
    for top in ["src", "tests", "benches"] {
        rust_files(&root().join(top), &mut paths);
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let syntax =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut seen = Seen::default();
            seen.visit_file(&syntax);
            (path.strip_prefix(root()).unwrap().to_path_buf(), seen)
        })
        .collect()
}

/// Where an item is declared, for the `@` rules: its folder of `src/`
/// (`admission` for `src/admission/decision/mod.rs`), or `tests` or
/// `benches`.
fn home(path: &Path) -> String {
    let mut parts = path.components().map(|c| c.as_os_str().to_string_lossy());
    match parts.next().as_deref() {
        Some("src") => parts
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_owned(),
        Some(top) => top.to_owned(),
        None => String::new(),
    }
}

/// Whether `word` is one of `allowed`, where `*x` is any word ending in
/// `x` and `x*` any word starting with it.
fn allows(allowed: &[String], word: &str) -> bool {
    allowed
        .iter()
        .any(|a| match (a.strip_prefix('*'), a.strip_suffix('*')) {
            (Some(suffix), _) => word.ends_with(suffix),
            (_, Some(prefix)) => word.starts_with(prefix),
            _ => a == word,
        })
}

/// What breaks the words: one line per binding or item.
fn breaches(words: &Words, files: &[(PathBuf, Seen)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, seen) in files {
        let file = path.display();
        for (name, ty) in &seen.bindings {
            if let Some(types) = words.types_of.get(name)
                && !allows(types, ty)
            {
                found.push(format!(
                    "{file}: `{name}` is a {ty}; the words give `{name}` to {}",
                    types.join(", ")
                ));
            }
            if let Some(names) = words.names_of.get(ty)
                && !allows(names, name)
            {
                found.push(format!(
                    "{file}: a {ty} is called `{name}`; the words call it {}",
                    names.join(", ")
                ));
            }
        }
        for item in &seen.items {
            if let Some(homes) = words.homes_of.get(item)
                && !homes.contains(&home(path))
            {
                found.push(format!(
                    "{file}: declares `{item}`, which the words keep to {}",
                    if homes == &["-"] {
                        "nothing (retired)".to_owned()
                    } else {
                        homes.join(", ")
                    }
                ));
            }
        }
    }
    found
}

#[test]
fn each_reserved_word_has_one_meaning_in_the_code() {
    let found = breaches(&words(), &sources());
    assert!(
        found.is_empty(),
        "words used with a second meaning (docs/ARCHITECTURE.md, Words):\n{}",
        found.join("\n")
    );
}

/// The rules can fail: a file that calls `Exemptions` a policy, names a
/// `policy` that is not one, and declares a retired word breaks each.
#[test]
fn a_second_meaning_is_found() {
    let file = syn::parse_file("struct Exemptions; fn gate(policy: &Exemptions, source: &str) {}")
        .unwrap();
    let mut seen = Seen::default();
    seen.visit_file(&file);
    let found = breaches(&words(), &[(PathBuf::from("src/admission/x.rs"), seen)]);
    let says = |what: &str| found.iter().any(|f| f.contains(what));
    assert!(says("`policy` is a Exemptions"), "{found:#?}");
    assert!(says("a Exemptions is called `policy`"), "{found:#?}");
    assert!(says("`source` is a str"), "{found:#?}");
    assert!(says("declares `gate`"), "{found:#?}");
}
