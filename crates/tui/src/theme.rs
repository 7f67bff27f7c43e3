//! Themes: TOML files (`themes/*.toml`, embedded; user themes in
//! `$XDG_CONFIG_HOME/dlq-triage/themes/NAME.toml`) mapping semantic keys to styles.

use ratatui::style::{Color, Modifier, Style};
use std::collections::BTreeMap;

const EMBEDDED: [(&str, &str); 4] = [
    ("default", include_str!("../../../themes/default.toml")),
    ("light", include_str!("../../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../../themes/mono.toml")),
];

/// Every style a theme defines. A misspelled name is a compile error; a theme file's
/// keys are checked against `KEYS` when it loads (an unknown key is an error naming it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StyleName {
    UiText,
    UiDim,
    UiBorder,
    UiBorderFocus,
    UiTitle,
    UiHeader,
    UiSelection,
    UiSelectionUnfocused,
    UiStatus,
    UiFooter,
    UiInfo,
    UiWarn,
    UiError,
    UiCount,
    UiSpark,
    UiMark,
    UiProvenance,
    UiMatch,
    StateOpen,
    StateDiscarded,
    StateReplaying,
    StateReplayed,
    StateResolved,
    StateFailedAgain,
    JsonKey,
    JsonString,
    JsonNumber,
    JsonLiteral,
    JsonPunct,
}

/// Each style's `section.key` in theme files, in enum order.
const KEYS: [(StyleName, &str); 29] = [
    (StyleName::UiText, "ui.text"),
    (StyleName::UiDim, "ui.dim"),
    (StyleName::UiBorder, "ui.border"),
    (StyleName::UiBorderFocus, "ui.border_focus"),
    (StyleName::UiTitle, "ui.title"),
    (StyleName::UiHeader, "ui.header"),
    (StyleName::UiSelection, "ui.selection"),
    (StyleName::UiSelectionUnfocused, "ui.selection_unfocused"),
    (StyleName::UiStatus, "ui.status"),
    (StyleName::UiFooter, "ui.footer"),
    (StyleName::UiInfo, "ui.info"),
    (StyleName::UiWarn, "ui.warn"),
    (StyleName::UiError, "ui.error"),
    (StyleName::UiCount, "ui.count"),
    (StyleName::UiSpark, "ui.spark"),
    (StyleName::UiMark, "ui.mark"),
    (StyleName::UiProvenance, "ui.provenance"),
    (StyleName::UiMatch, "ui.match"),
    (StyleName::StateOpen, "state.open"),
    (StyleName::StateDiscarded, "state.discarded"),
    (StyleName::StateReplaying, "state.replaying"),
    (StyleName::StateReplayed, "state.replayed"),
    (StyleName::StateResolved, "state.resolved"),
    (StyleName::StateFailedAgain, "state.failed_again"),
    (StyleName::JsonKey, "json.key"),
    (StyleName::JsonString, "json.string"),
    (StyleName::JsonNumber, "json.number"),
    (StyleName::JsonLiteral, "json.literal"),
    (StyleName::JsonPunct, "json.punct"),
];

impl StyleName {
    /// The style of a triage state (`state.failed_again` for `failed-again`).
    pub fn state(st: dlq_core::model::TriageState) -> StyleName {
        use dlq_core::model::TriageState as T;
        match st {
            T::Open => StyleName::StateOpen,
            T::Discarded => StyleName::StateDiscarded,
            T::Replaying => StyleName::StateReplaying,
            T::Replayed => StyleName::StateReplayed,
            T::Resolved => StyleName::StateResolved,
            T::FailedAgain => StyleName::StateFailedAgain,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    styles: [Style; KEYS.len()],
}

impl Theme {
    /// A style.
    pub fn get(&self, key: StyleName) -> Style {
        self.styles[key as usize]
    }

    pub(crate) fn embedded_names() -> Vec<&'static str> {
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
        if let Some(dir) = dlq_app::config::config_dir() {
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
            toml::from_str(text).map_err(|e| dlq_core::sanitize::toml_error(text, &e))?;
        let palette = doc.get("palette").cloned().unwrap_or_default();
        let mut styles: [Option<Style>; KEYS.len()] = [None; KEYS.len()];
        for (section, table) in &doc {
            if section == "palette" {
                continue;
            }
            if !KEYS
                .iter()
                .any(|(_, k)| k.split('.').next() == Some(section.as_str()))
            {
                return Err(format!(
                    "unknown section [{section}] (sections: palette, ui, state, json)"
                ));
            }
            for (key, spec) in table {
                let full = format!("{section}.{key}");
                let Some((s, _)) = KEYS.iter().find(|(_, k)| *k == full) else {
                    let known: Vec<&str> = KEYS
                        .iter()
                        .filter_map(|(_, k)| k.strip_prefix(&format!("{section}.")))
                        .collect();
                    return Err(format!("unknown key {full} (known: {})", known.join(", ")));
                };
                let style = parse_style(spec, &palette).map_err(|e| format!("{full}: {e}"))?;
                styles[*s as usize] = Some(style);
            }
        }
        let mut out = [Style::default(); KEYS.len()];
        for (i, (_, k)) in KEYS.iter().enumerate() {
            out[i] = styles[i].ok_or_else(|| format!("missing key {k}"))?;
        }
        Ok(Theme {
            name: name.to_string(),
            styles: out,
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
            assert_ne!(t.get(StyleName::UiSelection), Style::default(), "{name}");
        }
    }

    #[test]
    fn the_enum_and_the_keys_agree() {
        for (i, (s, _)) in KEYS.iter().enumerate() {
            assert_eq!(*s as usize, i);
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
