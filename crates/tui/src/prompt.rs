//! The prompt as a component: the line being typed at the bottom of the screen, and
//! what covers the panes (the help, a titled overlay such as `:problems` or a
//! transform's dry-run). The rest of the TUI asks it what is open (`input`, `typing`,
//! `help_shown`, `overlay`) and tells it what to open or close; what a submitted line
//! does is the update's business, not the prompt's.

use dlq_core::store::RowId;

/// A discard being asked for: its letters, in words, and (once given) its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discarding {
    pub rows: Vec<RowId>,
    /// `group timeout (23 letters)`, `letter m-17`, `3 marked letters (…)`.
    pub what: String,
    pub reason: String,
}

/// A transform being asked for: its letters, in words, and (once typed) its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transforming {
    pub rows: Vec<RowId>,
    pub what: String,
    pub program: String,
}

/// A line being typed at the bottom of the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    None,
    /// `/`: fuzzy words.
    Fuzzy(String),
    /// `f`: a filter expression.
    Expr(String),
    /// `:`: a command (`group reason,version`, `filter …`, `sort oldest`, `help`, `quit`).
    Command(String),
    /// `d`: the reason for discarding these letters (mandatory).
    DiscardReason(String, Discarding),
    /// Confirming a discard above the threshold: the count typed.
    DiscardCount(String, Discarding),
    /// `u`: the reason for seeing this letter unmasked (mandatory, audited).
    UnmaskReason(String, RowId),
    /// `e`: the reason for a payload revision (mandatory).
    EditReason(String, RowId),
    /// Confirming a replay above the threshold: the count typed, and the plan's count.
    ReplayCount(String, usize),
    /// `T`: the jq program for these letters.
    TransformProgram(String, Transforming),
    /// Then the reason recorded with each revision.
    TransformReason(String, Transforming),
    /// The dry-run is shown: `yes` (or the count, above the threshold) records this many
    /// revisions.
    TransformConfirm(String, usize),
}

impl Input {
    /// The line being typed, if any.
    pub fn text_mut(&mut self) -> Option<&mut String> {
        match self {
            Input::Fuzzy(s)
            | Input::Expr(s)
            | Input::Command(s)
            | Input::DiscardReason(s, _)
            | Input::DiscardCount(s, _)
            | Input::UnmaskReason(s, _)
            | Input::EditReason(s, _)
            | Input::ReplayCount(s, _)
            | Input::TransformProgram(s, _)
            | Input::TransformReason(s, _)
            | Input::TransformConfirm(s, _) => Some(s),
            Input::None => None,
        }
    }
}

/// A titled list over the panes; any key closes it.
pub type Overlay = (String, Vec<String>);

#[derive(Debug)]
pub struct Prompt {
    input: Input,
    show_help: bool,
    /// Lines the help is scrolled by (j/k, PgDn/PgUp in the help).
    help_scroll: u16,
    overlay: Option<Overlay>,
    /// The program the overlay suggests (`w`): the transform key opens it for editing.
    suggested: Option<String>,
}

impl Default for Prompt {
    fn default() -> Self {
        Prompt {
            input: Input::None,
            show_help: false,
            help_scroll: 0,
            overlay: None,
            suggested: None,
        }
    }
}

/// How far the help scrolls: past its end the view clamps anyway.
const HELP_SCROLL_MAX: i32 = 500;

impl Prompt {
    /// What is being typed, and for what.
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// A line is being typed: keys go to it.
    pub fn typing(&self) -> bool {
        self.input != Input::None
    }

    /// Ask for a line (a filter, a reason, a count, a program).
    pub fn ask(&mut self, input: Input) {
        self.input = input;
    }

    /// The line typed so far, to edit.
    pub fn text_mut(&mut self) -> Option<&mut String> {
        self.input.text_mut()
    }

    /// The line is submitted: what it was for, and the prompt is free again.
    pub fn take_input(&mut self) -> Input {
        std::mem::replace(&mut self.input, Input::None)
    }

    /// Stop typing, nothing submitted.
    pub fn drop_input(&mut self) {
        self.input = Input::None;
    }

    pub fn help_shown(&self) -> bool {
        self.show_help
    }

    /// `?`: the help opens from its top, or closes.
    pub fn toggle_help(&mut self) {
        self.show_help = !self.show_help;
        self.help_scroll = 0;
    }

    /// `:help`.
    pub fn show_help(&mut self) {
        self.show_help = true;
    }

    pub fn help_scroll(&self) -> u16 {
        self.help_scroll
    }

    pub fn scroll_help(&mut self, by: i16) {
        let to = (i32::from(self.help_scroll) + i32::from(by)).clamp(0, HELP_SCROLL_MAX);
        self.help_scroll = u16::try_from(to).unwrap_or(0);
    }

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    pub fn open_overlay(&mut self, overlay: Overlay) {
        self.overlay = Some(overlay);
        self.suggested = None;
    }

    /// An overlay that suggests a program (`w`'s fix).
    pub fn open_suggesting(&mut self, overlay: Overlay, program: Option<String>) {
        self.overlay = Some(overlay);
        self.suggested = program;
    }

    /// The program the open overlay suggests.
    pub fn suggested(&self) -> Option<&str> {
        self.overlay.as_ref().and(self.suggested.as_deref())
    }

    pub fn close_overlay(&mut self) {
        self.overlay = None;
        self.suggested = None;
    }

    /// Esc over the panes: the help and any overlay close; true if one was open.
    pub fn close_covers(&mut self) -> bool {
        let open = self.show_help || self.overlay.is_some();
        self.show_help = false;
        self.close_overlay();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submitted_line_frees_the_prompt() {
        let mut p = Prompt::default();
        p.ask(Input::Fuzzy(String::new()));
        p.text_mut().expect("typing").push_str("ev");
        assert!(p.typing());
        assert_eq!(p.take_input(), Input::Fuzzy("ev".into()));
        assert!(!p.typing() && p.text_mut().is_none());
    }

    #[test]
    fn the_help_scrolls_within_bounds_and_opens_at_its_top() {
        let mut p = Prompt::default();
        p.toggle_help();
        p.scroll_help(-3);
        assert_eq!(p.help_scroll(), 0);
        p.scroll_help(i16::MAX);
        assert_eq!(i32::from(p.help_scroll()), HELP_SCROLL_MAX);
        p.toggle_help();
        p.toggle_help();
        assert_eq!(p.help_scroll(), 0);
        p.open_overlay(("t".into(), vec![]));
        assert!(p.close_covers() && !p.help_shown() && p.overlay().is_none());
        assert!(!p.close_covers());
    }
}
