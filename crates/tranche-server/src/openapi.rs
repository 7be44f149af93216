//! The API description, written by hand in `openapi.json` and served as is. A test
//! checks it names exactly the routes the router serves.

use axum::http::header;
use axum::response::IntoResponse;

pub const DOCUMENT: &str = include_str!("openapi.json");

pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn document_names_exactly_the_served_routes() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("valid JSON");
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        let served: BTreeSet<(String, String)> = crate::routes()
            .into_iter()
            .map(|(m, p, _)| (m.to_string(), p.to_string()))
            .collect();
        assert_eq!(documented, served);
    }

    #[test]
    fn every_schema_reference_resolves() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r.trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
        }
    }

    fn collect_refs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", serde_json::Value::String(s)) => out.push(s.clone()),
                        _ => collect_refs(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }
}
