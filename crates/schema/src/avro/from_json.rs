//! JSON back into Avro values, checked against the writer schema field by field (an
//! edited or transformed payload is written back in the schema it was read in).

use super::*;

impl AvroSchema {
    #[allow(clippy::wrong_self_convention)]
    pub(super) fn from_json(
        &self,
        j: &Json,
        schema: &Schema,
        path: &str,
        depth: usize,
    ) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "{}: nested deeper than {MAX_DEPTH} levels",
                at(path)
            ));
        }
        let schema = self.resolve(schema)?;
        let wrong = |want: &str| format!("{}: expected {want}, found {}", at(path), kind(j));
        match schema {
            Schema::Array(a) => {
                let items = j.as_array().ok_or_else(|| wrong("an array"))?;
                let mut out = Vec::with_capacity(items.len());
                for (k, item) in items.iter().enumerate() {
                    out.push(self.from_json(item, &a.items, &format!("{path}[{k}]"), depth + 1)?);
                }
                Ok(Value::Array(out))
            }
            Schema::Map(m) => {
                let obj = j.as_object().ok_or_else(|| wrong("an object"))?;
                let mut out = HashMap::with_capacity(obj.len());
                for (k, item) in obj {
                    out.insert(
                        k.clone(),
                        self.from_json(item, &m.types, &join(path, k), depth + 1)?,
                    );
                }
                Ok(Value::Map(out))
            }
            Schema::Union(u) => {
                // Untagged: null takes the null branch; otherwise the first branch it fits.
                let mut first_err = None;
                for (i, branch) in u.variants().iter().enumerate() {
                    match self.from_json(j, branch, path, depth + 1) {
                        Ok(v) => return Ok(Value::Union(i as u32, Box::new(v))),
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
                Err(first_err.unwrap_or_else(|| wrong("a value of the union")))
            }
            Schema::Record(r) => self.record_from_json(j, r, path, depth),
            Schema::Decimal(d) => self.decimal(j, d, path),
            leaf => leaf_from_json(j, leaf, path),
        }
    }

    /// A record: every field from the object or the schema's default, no field the
    /// schema does not name.
    #[allow(clippy::wrong_self_convention)]
    pub(super) fn record_from_json(
        &self,
        j: &Json,
        r: &RecordSchema,
        path: &str,
        depth: usize,
    ) -> Result<Value, String> {
        let obj = j.as_object().ok_or_else(|| {
            format!(
                "{}: expected a {} object, found {}",
                at(path),
                r.name.fullname(None),
                kind(j)
            )
        })?;
        if let Some(extra) = obj.keys().find(|k| !r.lookup.contains_key(*k)) {
            return Err(format!(
                "{}: field `{extra}` is not in {}",
                at(path),
                r.name.fullname(None)
            ));
        }
        let mut out = Vec::with_capacity(r.fields.len());
        for f in &r.fields {
            let fp = join(path, &f.name);
            let v = match (obj.get(&f.name), &f.default) {
                (Some(v), _) => self.from_json(v, &f.schema, &fp, depth + 1)?,
                (None, Some(d)) => self.from_json(d, &f.schema, &fp, depth + 1)?,
                (None, None) => return Err(format!("{fp}: missing (the schema has no default)")),
            };
            out.push((f.name.clone(), v));
        }
        Ok(Value::Record(out))
    }

    pub(super) fn decimal(&self, j: &Json, d: &DecimalSchema, path: &str) -> Result<Value, String> {
        let text = match j {
            Json::String(s) => s.clone(),
            Json::Number(n) => n.to_string(),
            _ => {
                return Err(format!(
                    "{}: expected a decimal (as a string), found {}",
                    at(path),
                    kind(j)
                ))
            }
        };
        let unscaled = parse_decimal(&text, d.scale).ok_or_else(|| {
            format!(
                "{}: `{text}` is not a decimal with at most {} places",
                at(path),
                d.scale
            )
        })?;
        let digits = unscaled.magnitude().to_string().len();
        if digits > d.precision {
            return Err(format!(
                "{}: `{text}` has more than {} digits",
                at(path),
                d.precision
            ));
        }
        let mut bytes = unscaled.to_signed_bytes_be();
        if let InnerDecimalSchema::Fixed(f) = &d.inner {
            if bytes.len() > f.size {
                return Err(format!(
                    "{}: `{text}` does not fit {} bytes",
                    at(path),
                    f.size
                ));
            }
            let fill = if unscaled.sign() == num_bigint::Sign::Minus {
                0xff
            } else {
                0
            };
            let mut padded = vec![fill; f.size - bytes.len()];
            padded.extend_from_slice(&bytes);
            bytes = padded;
        }
        Ok(Value::Decimal(apache_avro::Decimal::from(bytes)))
    }
}

/// A value of a schema that nests nothing (primitives, enums, fixed, logical types).
fn leaf_from_json(j: &Json, schema: &Schema, path: &str) -> Result<Value, String> {
    let wrong = |want: &str| format!("{}: expected {want}, found {}", at(path), kind(j));
    Ok(match schema {
        Schema::Null => match j {
            Json::Null => Value::Null,
            _ => return Err(wrong("null")),
        },
        Schema::Boolean => Value::Boolean(j.as_bool().ok_or_else(|| wrong("true or false"))?),
        Schema::Int => {
            let n = j.as_i64().ok_or_else(|| wrong("an int"))?;
            Value::Int(
                i32::try_from(n).map_err(|_| format!("{}: {n} does not fit an int", at(path)))?,
            )
        }
        Schema::Long => Value::Long(j.as_i64().ok_or_else(|| wrong("a long"))?),
        Schema::Float => Value::Float(number(j).ok_or_else(|| wrong("a number"))? as f32),
        Schema::Double => Value::Double(number(j).ok_or_else(|| wrong("a number"))?),
        Schema::String => Value::String(j.as_str().ok_or_else(|| wrong("a string"))?.to_string()),
        Schema::Bytes => Value::Bytes(text_bytes(
            j.as_str().ok_or_else(|| wrong("a string of bytes"))?,
            path,
        )?),
        Schema::Fixed(f) => {
            let b = text_bytes(j.as_str().ok_or_else(|| wrong("a string of bytes"))?, path)?;
            if b.len() != f.size {
                return Err(format!(
                    "{}: {} bytes where the schema fixes {}",
                    at(path),
                    b.len(),
                    f.size
                ));
            }
            Value::Fixed(f.size, b)
        }
        Schema::Enum(e) => {
            let s = j.as_str().ok_or_else(|| wrong("an enum symbol"))?;
            let i = e.symbols.iter().position(|x| x == s).ok_or_else(|| {
                format!("{}: `{s}` is not one of {}", at(path), e.symbols.join(", "))
            })?;
            Value::Enum(i as u32, s.to_string())
        }
        Schema::BigDecimal => {
            return Err(format!("{}: big-decimal fields cannot be edited", at(path)))
        }
        Schema::Uuid(_) => {
            let s = j.as_str().ok_or_else(|| wrong("a uuid"))?;
            Value::Uuid(
                uuid::Uuid::parse_str(s).map_err(|e| format!("{}: not a uuid: {e}", at(path)))?,
            )
        }
        Schema::Ref { name } => {
            return Err(format!(
                "{}: unresolved reference {}",
                at(path),
                name.fullname(None)
            ))
        }
        time => time_from_json(j, time, path)?,
    })
}

/// Dates, instants, times of day and durations, as the JSON rendering writes them.
fn time_from_json(j: &Json, schema: &Schema, path: &str) -> Result<Value, String> {
    let wrong = |want: &str| format!("{}: expected {want}, found {}", at(path), kind(j));
    Ok(match schema {
        Schema::Date => match j {
            Json::String(s) => {
                let d = NaiveDate::parse_from_str(s, "%Y-%m-%d")
                    .map_err(|e| format!("{}: not a date (YYYY-MM-DD): {e}", at(path)))?;
                Value::Date(d.num_days_from_ce() - 719_163)
            }
            _ => Value::Date(
                i32::try_from(j.as_i64().ok_or_else(|| wrong("a date"))?)
                    .map_err(|_| wrong("a date"))?,
            ),
        },
        Schema::TimestampMillis => Value::TimestampMillis(instant(j, path, millis)?),
        Schema::LocalTimestampMillis => Value::LocalTimestampMillis(instant(j, path, millis)?),
        Schema::TimestampMicros => Value::TimestampMicros(instant(j, path, micros)?),
        Schema::LocalTimestampMicros => Value::LocalTimestampMicros(instant(j, path, micros)?),
        Schema::TimestampNanos => Value::TimestampNanos(instant(j, path, nanos)?),
        Schema::LocalTimestampNanos => Value::LocalTimestampNanos(instant(j, path, nanos)?),
        Schema::TimeMillis => Value::TimeMillis(
            i32::try_from(j.as_i64().ok_or_else(|| wrong("milliseconds"))?)
                .map_err(|_| wrong("milliseconds"))?,
        ),
        Schema::TimeMicros => Value::TimeMicros(j.as_i64().ok_or_else(|| wrong("microseconds"))?),
        Schema::Duration(_) => {
            let b = text_bytes(
                j.as_str().ok_or_else(|| wrong("a duration's 12 bytes"))?,
                path,
            )?;
            let arr: [u8; 12] = b.try_into().map_err(|_| wrong("a duration's 12 bytes"))?;
            Value::Duration(apache_avro::Duration::from(arr))
        }
        other => return Err(format!("{}: {other:?} is not supported", at(path))),
    })
}
