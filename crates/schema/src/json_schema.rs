//! JSON Schema: the payload is JSON already; the schema validates an edit (jsonschema)
//! and names the fields it tags PII (`"confluent:tags": ["PII"]` on a property).

use serde_json::Value as Json;

#[derive(Debug)]
pub struct JsonSchema {
    validator: jsonschema::Validator,
    pub name: String,
    pub pii: Vec<String>,
}

impl JsonSchema {
    pub fn parse(text: &str) -> Result<Self, String> {
        let schema: Json = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        let name = schema
            .get("title")
            .and_then(Json::as_str)
            .unwrap_or("(untitled)")
            .to_string();
        let mut pii = Vec::new();
        collect_pii(&schema, &mut pii, 0);
        pii.sort();
        pii.dedup();
        Ok(JsonSchema {
            validator,
            name,
            pii,
        })
    }

    /// The payload as compact JSON (it must parse; it is not validated — a letter that
    /// fails its schema is still read).
    pub fn decode(&self, bytes: &[u8]) -> Result<String, String> {
        let v: Json = serde_json::from_slice(bytes)
            .map_err(|e| format!("JSON Schema payload for {} is not JSON: {e}", self.name))?;
        Ok(v.to_string())
    }

    /// The edited JSON, if the schema accepts it; else the first field it refuses.
    pub fn encode(&self, json: &str) -> Result<Vec<u8>, String> {
        let v: Json = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
        if let Some(err) = self.validator.iter_errors(&v).next() {
            let at = err.instance_path().to_string();
            let at = if at.is_empty() {
                "the record".to_string()
            } else {
                at
            };
            return Err(format!("{at}: {err}"));
        }
        Ok(v.to_string().into_bytes())
    }
}

fn collect_pii(schema: &Json, out: &mut Vec<String>, depth: usize) {
    if depth > 64 {
        return;
    }
    let Json::Object(obj) = schema else {
        return;
    };
    if let Some(Json::Object(props)) = obj.get("properties") {
        for (name, prop) in props {
            if crate::avro::tagged_pii(prop.get("confluent:tags")) {
                out.push(name.clone());
            }
            collect_pii(prop, out, depth + 1);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get(key) {
            collect_pii(sub, out, depth + 1);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Json::Object(defs)) = obj.get(key) {
            defs.values().for_each(|d| collect_pii(d, out, depth + 1));
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(Json::Array(subs)) = obj.get(key) {
            subs.iter().for_each(|d| collect_pii(d, out, depth + 1));
        }
    }
}
