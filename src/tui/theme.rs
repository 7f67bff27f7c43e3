//! Themes: TOML files (`themes/*.toml`, embedded; user themes in
//! `$XDG_CONFIG_HOME/dlq-triage/themes/NAME.toml`) mapping semantic keys to styles.

use ratatui::style::{Color, Modifier, Style};
use std::collections::{BTreeMap, HashMap};

const EMBEDDED: [(&str, &str); 4] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

/// Every key a theme must define, by section.
const KEYS: [(&str, &[&str]); 3] = [
    (
        "ui",
        &[
            "text",
            "dim",
            "border",
            "border_focus",
            "title",
            "header",
            "selection",
            "selection_unfocused",
            "status",
            "footer",
            "info",
            "warn",
            "error",
            "count",
            "spark",
            "mark",
            "provenance",
        ],
    ),
    (
        "state",
        &[
            "open",
            "discarded",
            "replaying",
            "replayed",
            "resolved",
            "failed_again",
        ],
    ),
    ("json", &["key", "string", "number", "literal", "punct"]),
];

#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    styles: HashMap<String, Style>,
}

impl Theme {
    /// A style by `section.key` (e.g. `ui.border`, `state.failed_again`).
    pub fn get(&self, key: &str) -> Style {
        self.styles.get(key).copied().unwrap_or_default()
    }

    pub fn embedded_names() -> Vec<&'static str> {
        EMBEDDED.iter().map(|(n, _)| *n).collect()
    }

    /// Load by name: a user theme file first, then the embedded ones. `NO_COLOR` (set
    /// and non-empty) forces `mono` unless a theme was asked for explicitly.
    pub fn load(name: Option<&str>) -> Result<Theme, String> {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let name = match name {
            Some(n) => n,
            None if no_color => "mono",
            None => "default",
        };
        if let Some(dir) = crate::config::config_dir() {
            let path = dir.join("themes").join(format!("{name}.toml"));
            if let Ok(text) = std::fs::read_to_string(&path) {
                return Theme::parse(name, &text)
                    .map_err(|e| format!("theme {}: {e}", path.display()));
            }
        }
        match EMBEDDED.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => Theme::parse(n, text).map_err(|e| format!("theme {n}: {e}")),
            None => Err(format!(
                "no theme `{name}` (built in: {}; or add {name}.toml to the config dir's themes/)",
                Theme::embedded_names().join(", ")
            )),
        }
    }

    /// Parse a theme file. Errors name the offending key.
    pub fn parse(name: &str, text: &str) -> Result<Theme, String> {
        let doc: BTreeMap<String, BTreeMap<String, String>> =
            toml::from_str(text).map_err(|e| e.to_string())?;
        let palette = doc.get("palette").cloned().unwrap_or_default();
        let mut styles = HashMap::new();
        for (section, table) in &doc {
            if section == "palette" {
                continue;
            }
            let known = KEYS
                .iter()
                .find(|(s, _)| s == section)
                .map(|(_, k)| *k)
                .ok_or_else(|| {
                    format!("unknown section [{section}] (sections: palette, ui, state, json)")
                })?;
            for (key, spec) in table {
                if !known.contains(&key.as_str()) {
                    return Err(format!(
                        "unknown key {section}.{key} (known: {})",
                        known.join(", ")
                    ));
                }
                let style =
                    parse_style(spec, &palette).map_err(|e| format!("{section}.{key}: {e}"))?;
                styles.insert(format!("{section}.{key}"), style);
            }
        }
        for (section, keys) in KEYS {
            for k in keys {
                if !styles.contains_key(&format!("{section}.{k}")) {
                    return Err(format!("missing key {section}.{k}"));
                }
            }
        }
        Ok(Theme {
            name: name.to_string(),
            styles,
        })
    }
}

fn parse_style(spec: &str, palette: &BTreeMap<String, String>) -> Result<Style, String> {
    let mut style = Style::default();
    for tok in spec.split_whitespace() {
        if let Some(c) = tok.strip_prefix("fg:") {
            style = style.fg(parse_color(c, palette)?);
        } else if let Some(c) = tok.strip_prefix("bg:") {
            style = style.bg(parse_color(c, palette)?);
        } else {
            let m = match tok {
                "bold" => Modifier::BOLD,
                "italic" => Modifier::ITALIC,
                "underline" => Modifier::UNDERLINED,
                "dim" => Modifier::DIM,
                "reversed" => Modifier::REVERSED,
                _ => return Err(format!("`{tok}` is not fg:COLOR, bg:COLOR or a modifier (bold italic underline dim reversed)")),
            };
            style = style.add_modifier(m);
        }
    }
    Ok(style)
}

fn parse_color(c: &str, palette: &BTreeMap<String, String>) -> Result<Color, String> {
    let resolved = palette.get(c).map_or(c, String::as_str);
    if let Some(hex) = resolved.strip_prefix('#') {
        if hex.len() == 6 {
            if let Ok(v) = u32::from_str_radix(hex, 16) {
                return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
            }
        }
        return Err(format!("`{resolved}` is not a #rrggbb colour"));
    }
    resolved
        .replace('-', "")
        .parse::<Color>()
        .map_err(|_| format!("unknown colour `{c}` (palette name, #rrggbb, or a terminal colour such as red, light-blue, gray)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_themes_are_complete() {
        for name in Theme::embedded_names() {
            let t = Theme::load(Some(name)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(t.name, name);
            assert_ne!(t.get("ui.selection"), Style::default(), "{name}");
        }
    }

    #[test]
    fn broken_themes_name_the_key() {
        let base = EMBEDDED[0].1;
        let typo = base.replace("border_focus =", "bordr_focus =");
        assert!(Theme::parse("x", &typo).is_err_and(|e| e.contains("ui.bordr_focus")));
        let bad_color = base.replace("error = \"fg:red bold\"", "error = \"fg:chartreuse\"");
        assert!(Theme::parse("x", &bad_color)
            .is_err_and(|e| e.contains("ui.error") && e.contains("chartreuse")));
        let missing = base.replace("failed_again = \"fg:red bold\"\n", "");
        assert!(Theme::parse("x", &missing).is_err_and(|e| e.contains("state.failed_again")));
        assert!(Theme::load(Some("nope")).is_err_and(|e| e.contains("built in: default, light")));
    }
}
