//! The answers after "what is failing": since when and with which release
//! ([`since`]), what is different about a group's letters ([`shape`]), and the program
//! that would repair a difference with a mechanical fix ([`fix`]). Computed here once;
//! the TUI's `w` and `summary --json` only lay them out.

pub mod fix;
pub mod shape;
pub mod since;
