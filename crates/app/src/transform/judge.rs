//! What a program makes of one letter, and what the role is shown of it: the same
//! program run on the masked view (never the real run judged harmless), the output
//! encoded back in the letter's writer schema.

use super::*;

/// A letter's judgement before its runs: decided already (revised by this program, not
/// transformable), or what its runs will be judged against.
pub(super) enum Judging {
    Done(Outcome),
    Runs(Box<Pending>),
}

/// What a letter's runs are judged against, with where in the batch its runs are.
pub(super) struct Pending {
    /// The letter as an earlier revision left it (None: the letter itself is the base).
    revised: Option<DeadLetter>,
    before: Value,
    shown_before: Value,
    sha256_before: String,
    /// Index of the real run in the batch's inputs; of the masked run where it differs.
    real: usize,
    masked: Option<usize>,
}

impl Transform {
    /// What the program makes of one letter, first half: its base, the input as the
    /// role sees it, and the inputs to run (pushed onto `inputs`: the real input, and the
    /// masked view where it differs). Failures still go through the masker in `offer`,
    /// for what the detectors find in the words shown.
    pub(super) fn prepare_judging(
        &mut self,
        letter: &DeadLetter,
        inputs: &mut Vec<Vec<u8>>,
    ) -> Result<Judging, SessionError> {
        let masker = self.settings.masker.with_fields(letter.pii_fields());
        let latest = self.latest.get(&letter.id.value.0).cloned();
        let revised = match &latest {
            Some(r) if r.program_sha256.as_deref() == Some(self.program_sha.as_str()) => {
                return Ok(Judging::Done(Outcome::Already))
            }
            Some(r) => {
                let mut raw = letter.raw.clone();
                raw.payload.clone_from(&r.payload);
                Some(self.settings.extract(raw))
            }
            None => None,
        };
        let (base, base_raw): (&DeadLetter, &[u8]) = match (&revised, &latest) {
            (Some(d), Some(r)) => (d, &r.payload),
            _ => (letter, &letter.raw.payload),
        };
        // Causes the role may see as they are: they describe the letter's form only.
        let plain = |why: String| {
            Judging::Done(Outcome::Failed {
                real: why.clone(),
                on_masked: Some(why),
            })
        };
        if let Some(why) = not_transformable(base) {
            return Ok(plain(why));
        }
        let input = base.readable_payload();
        let Ok(before) = serde_json::from_slice::<Value>(input) else {
            return Ok(plain("the payload is not JSON".into()));
        };
        // What the role sees of the input: masked; where an earlier program revised it,
        // what that program computes on the masked original (never the stored revision).
        let earlier = latest.as_ref().and_then(|r| r.program_sha256.clone());
        let masked = match earlier {
            None => masked_view(&masker, input),
            Some(_) => masked_view(&masker, letter.readable_payload()),
        };
        let shown_before = self.shown_before(earlier, &letter.id.value.0, masked, &before)?;
        let sha256_before = sha256_hex(base_raw);
        let real = inputs.len();
        inputs.push(input.to_vec());
        // The same program on what the role sees; where that is the input itself, its run.
        let masked = (shown_before != before).then(|| {
            inputs.push(shown_before.to_string().into_bytes());
            real + 1
        });
        Ok(Judging::Runs(Box::new(Pending {
            revised,
            before,
            shown_before,
            sha256_before,
            real,
            masked,
        })))
    }

    /// Second half, with the batch's runs: the outcome.
    pub(super) fn judged(
        &self,
        letter: &DeadLetter,
        p: Pending,
        runs: &mut [Option<Run>],
    ) -> Outcome {
        let mut take = |i: usize| {
            runs.get_mut(i)
                .and_then(Option::take)
                .unwrap_or_else(|| Run::Failed("the worker answered nothing".into()))
        };
        let real = take(p.real);
        let on_masked = match p.masked {
            None => match &real {
                Run::Output(v) => Ok(v.clone()),
                Run::Failed(w) => Err(w.clone()),
            },
            Some(i) => match take(i) {
                Run::Output(v) => Ok(v),
                Run::Failed(w) => Err(w),
            },
        };
        let after = match real {
            Run::Failed(why) => {
                return Outcome::Failed {
                    real: why,
                    on_masked: on_masked.err(),
                }
            }
            Run::Output(after) => after,
        };
        if p.before == after {
            return Outcome::Unchanged;
        }
        let base = p.revised.as_ref().unwrap_or(letter);
        let bytes = match self.encoded(base, &after, &on_masked) {
            Ok(b) => b,
            Err((real, on_masked)) => return Outcome::Failed { real, on_masked },
        };
        Outcome::Changed {
            before: p.before,
            after,
            shown_before: p.shown_before,
            on_masked,
            bytes,
            sha256_before: p.sha256_before,
        }
    }

    /// What the role sees of a letter's input: `masked`, the masked input; where an
    /// earlier program (`earlier`, its sha) revised the letter, what that program
    /// computes on `masked`, the masked original — never the stored revision. Where
    /// neither can be had, the input's shape.
    pub(super) fn shown_before(
        &mut self,
        earlier: Option<String>,
        id: &str,
        masked: Option<Value>,
        before: &Value,
    ) -> Result<Value, SessionError> {
        let Some(masked) = masked else {
            return Ok(derived::shape(before));
        };
        let Some(sha) = earlier else {
            return Ok(masked);
        };
        Ok(match self.earlier(&sha, id)? {
            Some(sandbox) => match run(sandbox, masked.to_string().as_bytes())? {
                Run::Output(v) => v,
                Run::Failed(_) => derived::shape(before),
            },
            None => derived::shape(before),
        })
    }

    /// The program's output as the letter's bytes: JSON, or through the codec in the
    /// letter's writer schema. A refusal is why, and what the role sees of it: the
    /// masked run's refusal (the encoder may quote the value it refused).
    pub(super) fn encoded(
        &self,
        base: &DeadLetter,
        after: &Value,
        on_masked: &Result<Value, String>,
    ) -> Result<Vec<u8>, (String, Option<String>)> {
        let refused = |name: &str, e: &str| {
            format!(
                "the output does not fit {name}: {}",
                fingerprint::normalize(e)
            )
        };
        match (base.decoded(), self.settings.codec.as_deref()) {
            (None, _) => Ok(serde_json::to_vec(after).unwrap_or_default()),
            (Some(d), Some(codec)) => codec.encode(&d.schema, &after.to_string()).map_err(|e| {
                let seen = on_masked
                    .as_ref()
                    .ok()
                    .and_then(|m| codec.encode(&d.schema, &m.to_string()).err())
                    .map(|e| refused(&d.schema.name, &e.0));
                (refused(&d.schema.name, &e.0), seen)
            }),
            (Some(d), None) => {
                let why = format!("{} cannot be written back in this run", d.schema.name);
                Err((why.clone(), Some(why)))
            }
        }
    }
}
