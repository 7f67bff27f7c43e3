//! Values in and out of either engine: Rust values as parameters, row columns back as
//! Rust values, with the column and what was wanted named when they do not fit.

use super::*;

pub trait ToValue {
    fn to_value(&self) -> Value;
}

macro_rules! int_values {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_values!(i64, i32, u32, u16, u8);

impl ToValue for usize {
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}
impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}
impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}
impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}
impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}
impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}
impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

/// Parameters: `p![a, b]` is `&[&a, &b]` as `&[&dyn ToValue]`.
#[macro_export]
#[doc(hidden)]
macro_rules! p {
    () => { &[] as &[&dyn $crate::db::ToValue] };
    ($($x:expr),+ $(,)?) => { &[$(&$x as &dyn $crate::db::ToValue),+] as &[&dyn $crate::db::ToValue] };
}

pub trait FromValue: Sized {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError>;
}

fn wrong(col: usize, want: &'static str, v: &Value) -> DbError {
    DbError::Type {
        col,
        want,
        found: v.clone(),
    }
}

impl FromValue for i64 {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(wrong(col, "an integer", other)),
        }
    }
}
impl FromValue for u32 {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        let i = i64::from_value(v, col)?;
        u32::try_from(i).map_err(|_| wrong(col, "a u32", v))
    }
}
impl FromValue for bool {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        Ok(i64::from_value(v, col)? != 0)
    }
}
impl FromValue for String {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => Err(wrong(col, "text", other)),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            other => Err(wrong(col, "bytes", other)),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value, col: usize) -> Result<Self, DbError> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v, col).map(Some),
        }
    }
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Row(pub(super) Vec<Value>);

impl Row {
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T, DbError> {
        T::from_value(self.0.get(i).unwrap_or(&Value::Null), i)
    }

    /// Column `i`'s text, moved out (the row is read once: no copy of a long detail).
    pub fn take_text(&mut self, i: usize) -> Result<String, DbError> {
        match self.0.get_mut(i).map(std::mem::take) {
            Some(Value::Text(s)) => Ok(s),
            other => Err(wrong(i, "text", &other.unwrap_or(Value::Null))),
        }
    }

    pub fn value(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&Value::Null)
    }
}
