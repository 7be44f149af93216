//! docs/architecture.md draws the crate graph; this keeps the drawing the graph the
//! Cargo.toml files declare, so the page cannot go stale unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// (crate, crate it depends on), from each workspace crate's `[dependencies]`, leaving
/// out the tests' fixtures (the page says why).
fn declared(root: &Path) -> BTreeSet<(String, String)> {
    let mut edges = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let toml: toml::Table = text.parse().unwrap();
        let name = toml["package"]["name"].as_str().unwrap().to_string();
        let Some(deps) = toml.get("dependencies").and_then(|d| d.as_table()) else {
            continue;
        };
        for dep in deps.keys() {
            if dep.starts_with("tranche") && dep != "tranche-test-support" {
                edges.insert((name.clone(), dep.clone()));
            }
        }
    }
    edges
}

/// (crate, crate it depends on), from the page's mermaid graph: nodes `id["crate<br/>…"]`
/// and arrows `a --> b`.
fn documented(page: &str) -> BTreeSet<(String, String)> {
    let graph = page
        .split("```mermaid")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a mermaid graph in docs/architecture.md");
    let mut crates = BTreeMap::new();
    let mut arrows = Vec::new();
    for line in graph.lines().map(str::trim) {
        if let Some((id, label)) = line.split_once("[\"") {
            let name = label.split(['<', '"']).next().unwrap();
            crates.insert(id.to_string(), name.to_string());
        } else if let Some((from, to)) = line.split_once(" --> ") {
            arrows.push((from.to_string(), to.to_string()));
        }
    }
    let name = |id: &str| {
        crates
            .get(id)
            .unwrap_or_else(|| panic!("the graph's arrow names {id}, not a node of it"))
            .clone()
    };
    arrows
        .iter()
        .map(|(from, to)| (name(from), name(to)))
        .collect()
}

#[test]
fn the_documented_crate_graph_is_the_declared_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let (declared, documented) = (declared(&root), documented(&page));
    let missing: Vec<_> = declared.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&declared).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's graph: arrows to add {missing:?}, arrows no Cargo.toml declares {stale:?}"
    );
}
