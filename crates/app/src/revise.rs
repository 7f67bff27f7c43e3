//! Seeing and changing a letter's payload: unmask and edit, each with its permission
//! check and its audit entry, once for both front ends (`show --unmask`, `edit`, the
//! TUI's `u` and `e`). A front end gathers the reason and renders the outcome; whether
//! the user may, and what the ledger says about it, is decided here.

use crate::editor::{edit_payload, Edited};
use crate::session::{Principal, SessionError};
use dlq_core::access::Permission;
use dlq_core::masking::Masker;
use dlq_core::model::DeadLetter;
use dlq_core::schema::{Decoding, PayloadCodec};

/// What an unmask is for, recorded with it (`show`, `edit --unmasked`, the TUI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnmaskFor {
    View,
    Edit,
    /// A transform's sample, real values (`transform --dry-run --unmask`).
    Transform,
}

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revised {
    /// The editor closed without a change: nothing recorded.
    Unchanged,
    /// Revision `number` recorded; the JSON paths it changed.
    Saved { number: i64, paths: Vec<String> },
}

impl Principal {
    /// Unmask one letter: needs the Unmask permission (a refusal is audited) and a
    /// reason, and is audited before the caller shows anything — a failed audit write
    /// means nothing is shown. `letter_id` is the letter's id as recorded.
    pub fn unmask(
        &self,
        source_key: &str,
        letter_id: &str,
        reason: &str,
        purpose: UnmaskFor,
    ) -> Result<(), SessionError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(SessionError::Invalid(
                "unmasking needs a reason saying why (it is audited); nothing shown".into(),
            ));
        }
        self.require(Permission::Unmask, letter_id)?;
        let mut detail = serde_json::json!({"reason": reason, "source": source_key});
        match purpose {
            UnmaskFor::View => {}
            UnmaskFor::Edit => detail["for"] = "edit --unmasked".into(),
            UnmaskFor::Transform => detail["for"] = "transform --unmask".into(),
        }
        self.audit("unmask", letter_id, &detail.to_string())?;
        Ok(())
    }

    /// Edit a letter's payload in `$EDITOR` as JSON — the decoded form of a
    /// schema-encoded one — and record the result as a new revision (the original is never
    /// rewritten). A schema-encoded payload is written back with its own writer schema
    /// (same id and framing) by `codec`; an edit that no longer fits is refused with the
    /// field named, nothing recorded. Needs Edit, and Unmask too when `unmasked` (that
    /// unmask is audited before the editor opens).
    #[allow(clippy::too_many_arguments)]
    pub fn edit_and_record(
        &self,
        masker: &Masker,
        codec: Option<&dyn PayloadCodec>,
        source_key: &str,
        letter_id: &str,
        letter: &DeadLetter,
        reason: &str,
        unmasked: bool,
    ) -> Result<Revised, SessionError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(SessionError::Invalid(
                "an edit needs a reason (it is recorded with the revision)".into(),
            ));
        }
        // Before the editor opens: a refused edit must not cost the engineer their work.
        self.require_write(dlq_core::access::WriteOp::Edit, letter_id)?;
        if unmasked {
            self.unmask(source_key, letter_id, reason, UnmaskFor::Edit)?;
        }
        if let Some(s @ (Decoding::Pending(_) | Decoding::Undecodable(_))) = &letter.schema {
            return Err(SessionError::Invalid(format!(
                "the payload is not decoded ({}): it cannot be edited",
                s.describe()
            )));
        }
        let masker = masker.with_fields(letter.pii_fields());
        let edited = edit_payload(&masker, letter.readable_payload(), unmasked)
            .map_err(SessionError::Invalid)?;
        match edited {
            Edited::Unchanged => Ok(Revised::Unchanged),
            Edited::Changed { after, paths } => {
                // Recorded, and read by every role, as the role that may see least sees
                // them (an unmasked edit may change a key that is an email).
                let paths: Vec<String> = paths
                    .iter()
                    .map(|p| dlq_core::revision::masked_path(p, &|k| masker.mask_text(k)))
                    .collect();
                let after = match (letter.decoded(), codec) {
                    (None, _) => after,
                    (Some(d), Some(codec)) => {
                        let json = String::from_utf8_lossy(&after);
                        codec.encode(&d.schema, &json).map_err(|e| {
                            SessionError::Invalid(format!(
                                "the edit does not fit {}: {}; nothing saved",
                                d.schema.name,
                                masker.mask_text(&e.0)
                            ))
                        })?
                    }
                    (Some(_), None) => {
                        return Err(SessionError::Invalid(
                            "the payload was decoded with a schema this run cannot write back; nothing saved".into(),
                        ))
                    }
                };
                let number = self.ledger_to_write()?.record_revision(
                    source_key,
                    letter_id,
                    reason,
                    &paths,
                    &letter.raw.payload,
                    &after,
                )?;
                Ok(Revised::Saved { number, paths })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlq_core::access::Role;

    fn principal(dir: &std::path::Path, role: Role) -> Principal {
        Principal {
            actor: "alice".into(),
            role,
            read_only: false,
            ledger_unreachable: None,
            ledger: Some(dlq_core::ledger_location::Location::File(
                dir.join("ledger.db"),
            )),
        }
    }

    #[test]
    fn an_operator_cannot_unmask_and_the_refusal_is_audited() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = principal(dir.path(), Role::Operator);
        let e = p
            .unmask("demo", "m-1", "incident 42", UnmaskFor::View)
            .expect_err("operators cannot unmask");
        assert!(e.to_string().contains("privileged"), "{e}");
        let actions: Vec<String> = p
            .ledger()
            .expect("ledger")
            .audit_entries()
            .expect("entries")
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(actions, ["denied"]);
    }

    #[test]
    fn an_unmask_without_a_reason_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = principal(dir.path(), Role::Privileged);
        assert!(p.unmask("demo", "m-1", "  ", UnmaskFor::View).is_err());
        assert!(!dir.path().join("ledger.db").exists());
        p.unmask("demo", "m-1", "incident 42", UnmaskFor::Edit)
            .expect("privileged may");
        let entries = p
            .ledger()
            .expect("ledger")
            .audit_entries()
            .expect("entries");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].action, "unmask");
        assert!(entries[0].detail.contains("edit --unmasked"));
    }

    #[test]
    fn a_viewer_cannot_edit() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = principal(dir.path(), Role::Viewer);
        let masker = Masker::with_key(b"k".to_vec());
        let letter = dlq_core::conventions::extract(dlq_core::model::RawLetter::default(), &[]);
        let e = p
            .edit_and_record(&masker, None, "demo", "m-1", &letter, "fix", false)
            .expect_err("viewers cannot edit");
        assert!(matches!(e, SessionError::Refused { .. }), "{e}");
    }
}
