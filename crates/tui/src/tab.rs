//! The detail pane's tabs: a leaf the messages (`action`) and the state both name.

/// A tab of the detail pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Failure,
    Headers,
    Payload,
    Diff,
    History,
}

impl Tab {
    pub(crate) const ALL: [Tab; 5] = [
        Tab::Failure,
        Tab::Headers,
        Tab::Payload,
        Tab::Diff,
        Tab::History,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Failure => "Failure",
            Tab::Headers => "Headers",
            Tab::Payload => "Payload",
            Tab::Diff => "Diff",
            Tab::History => "History",
        }
    }
}
