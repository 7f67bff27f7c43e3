//! The source picker: a list of DLQs (found on a broker, or named in the config), one of
//! which `Enter` opens. Runs before the triage screen, on the same terminal.

use crate::theme::{StyleName, Theme};
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use dlq_core::sanitize;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::{Frame, Terminal};

/// One row: what it is, and how many letters the broker reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub name: String,
    pub detail: String,
    pub count: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picker {
    pub title: String,
    pub choices: Vec<Choice>,
    pub cursor: usize,
}

/// What a key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Picked {
    Open(usize),
    Cancel,
    Stay,
}

impl Picker {
    pub fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> Picked {
        let last = self.choices.len().saturating_sub(1);
        match code {
            KeyCode::Down | KeyCode::Char('j') => self.cursor = (self.cursor + 1).min(last),
            KeyCode::Up | KeyCode::Char('k') => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Home | KeyCode::Char('g') => self.cursor = 0,
            KeyCode::End | KeyCode::Char('G') => self.cursor = last,
            KeyCode::Enter | KeyCode::Char('l') if !self.choices.is_empty() => {
                return Picked::Open(self.cursor)
            }
            KeyCode::Esc | KeyCode::Char('q') => return Picked::Cancel,
            KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return Picked::Cancel,
            _ => {}
        }
        Picked::Stay
    }

    /// Every string here came from a broker or a config file: sanitized.
    pub fn render(&self, f: &mut Frame, t: &Theme) {
        let area = f.area();
        let block = Block::default()
            .borders(Borders::ALL)
            .title(format!(" {} ", sanitize::line(&self.title, 200)))
            .border_style(t.get(StyleName::UiBorderFocus));
        let inner = block.inner(area);
        f.render_widget(block, area);
        let w = usize::from(inner.width);
        let h = usize::from(inner.height).saturating_sub(2);
        let offset = self.cursor.saturating_sub(h.saturating_sub(1));
        let mut lines: Vec<Line> = Vec::new();
        if self.choices.is_empty() {
            lines.push(Line::from(Span::styled(
                " nothing found that looks like a DLQ (see `dlq-triage queues` / `topics --all`)",
                t.get(StyleName::UiWarn),
            )));
        }
        for (i, c) in self.choices.iter().enumerate().skip(offset).take(h) {
            let count = c.count.map_or("-".to_string(), |n| n.to_string());
            let text = format!(
                " {:<48} {:>10}  {}",
                sanitize::line(&c.name, 48),
                count,
                sanitize::line(&c.detail, 60)
            );
            let text: String = text.chars().take(w).collect();
            let style = if i == self.cursor {
                t.get(StyleName::UiSelection)
            } else {
                t.get(StyleName::UiText)
            };
            lines.push(Line::from(Span::styled(text, style)));
        }
        f.render_widget(Paragraph::new(lines), inner);
        let help = Rect::new(
            inner.x,
            inner.y + inner.height.saturating_sub(1),
            inner.width,
            1,
        );
        f.render_widget(
            Paragraph::new(Span::styled(
                " j/k move · Enter open · q quit",
                t.get(StyleName::UiDim),
            )),
            help,
        );
    }
}

/// Show the picker on the terminal until a choice or a cancel.
pub fn run(mut picker: Picker, theme: &Theme) -> anyhow::Result<Option<usize>> {
    crossterm::terminal::enable_raw_mode()
        .map_err(|e| anyhow::anyhow!("this needs a terminal: {e}"))?;
    let result = (|| {
        crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)?;
        let mut term = Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
        term.clear()?;
        loop {
            term.draw(|f| picker.render(f, theme))?;
            let Event::Key(k) = crossterm::event::read()? else {
                continue;
            };
            if k.kind == KeyEventKind::Release {
                continue;
            }
            match picker.key(k.code, k.modifiers) {
                Picked::Open(i) => return Ok(Some(i)),
                Picked::Cancel => return Ok(None),
                Picked::Stay => {}
            }
        }
    })();
    super::restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    fn picker() -> Picker {
        Picker {
            title: "DLQs on kafka://k:9092".into(),
            choices: vec![
                Choice {
                    name: "invoices.dlq".into(),
                    detail: "topic".into(),
                    count: Some(1200),
                },
                Choice {
                    name: "payments.dlq\u{1b}[2J".into(),
                    detail: "topic".into(),
                    count: Some(130),
                },
            ],
            cursor: 0,
        }
    }

    #[test]
    fn keys_move_open_and_cancel() {
        let mut p = picker();
        assert_eq!(p.key(KeyCode::Char('j'), KeyModifiers::NONE), Picked::Stay);
        assert_eq!(p.key(KeyCode::Down, KeyModifiers::NONE), Picked::Stay);
        assert_eq!(p.cursor, 1, "stops at the end");
        assert_eq!(p.key(KeyCode::Enter, KeyModifiers::NONE), Picked::Open(1));
        assert_eq!(
            p.key(KeyCode::Char('q'), KeyModifiers::NONE),
            Picked::Cancel
        );
    }

    #[test]
    fn rows_show_names_and_counts_with_escapes_made_visible() {
        let p = picker();
        let theme = Theme::load(Some("mono")).expect("theme");
        let mut t = Terminal::new(TestBackend::new(90, 8)).expect("terminal");
        t.draw(|f| p.render(f, &theme)).expect("draw");
        let buf = t.backend().buffer().clone();
        let text: String = (0..buf.area.height)
            .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
            .map(|(x, y)| buf[(x, y)].symbol().to_string())
            .collect();
        assert!(text.contains("invoices.dlq") && text.contains("1200"));
        assert!(text.contains("\\x1b[2J"), "escape shown, not run");
    }
}
