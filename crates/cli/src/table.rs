//! Plain aligned tables for human output. Every cell is sanitized here, so no caller can
//! forget to.

use dlq_core::sanitize;

pub(crate) struct Table {
    headers: Vec<&'static str>,
    /// Right-align these columns (numbers).
    right: Vec<bool>,
    max: Vec<usize>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns as (header, right-aligned, max width).
    pub fn new(cols: &[(&'static str, bool, usize)]) -> Self {
        Table {
            headers: cols.iter().map(|c| c.0).collect(),
            right: cols.iter().map(|c| c.1).collect(),
            max: cols.iter().map(|c| c.2).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .iter()
            .zip(&self.max)
            .map(|(c, &m)| {
                let s = sanitize::line(c, usize::MAX);
                if s.chars().count() > m {
                    let cut: String = s.chars().take(m.saturating_sub(1)).collect();
                    format!("{cut}…")
                } else {
                    s
                }
            })
            .collect();
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = w[i].saturating_sub(c.chars().count());
                if i > 0 {
                    l.push_str("  ");
                }
                if self.right[i] {
                    l.push_str(&" ".repeat(pad));
                    l.push_str(c);
                } else {
                    l.push_str(c);
                    if i + 1 < n {
                        l.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(self.headers.clone(), &mut out);
        for r in &self.rows {
            line(r.iter().map(String::as_str).collect(), &mut out);
        }
        out
    }
}
