//! The one thing the ledger asks of a database: statements with `?N` parameters, rows of
//! plain values, and two kinds of transaction (one writer at a time; a consistent read
//! snapshot). SQLite (a file, one engineer) and PostgreSQL (a server, the team) behind it,
//! so the journal, the chain and verification are written once.

use postgres::types::{IsNull, ToSql, Type};
use std::cell::RefCell;
use std::collections::HashMap;

mod values;
pub use values::*;

/// A column value as the ledger uses them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    /// A PostgreSQL array (the team ledger's functions take a batch in one call).
    Array(Vec<Value>),
}

impl Value {
    /// An array of `items`.
    pub fn array<T: ToValue>(items: impl IntoIterator<Item = T>) -> Value {
        Value::Array(items.into_iter().map(|i| i.to_value()).collect())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The server's message, detail and hint (not its source again: it says the same).
    #[error("{}", pg_message(.0))]
    Pg(postgres::Error),
    #[error("column {col}: expected {want}, found {found:?}")]
    Type {
        col: usize,
        want: &'static str,
        found: Value,
    },
    #[error("{0}")]
    Value(String),
    #[error("no row")]
    NoRow,
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> Self {
        DbError::Pg(e)
    }
}

/// A server error with its detail and hint (the driver's Display says only "db error").
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = d.message().to_string();
            if let Some(detail) = d.detail() {
                s.push_str(&format!(" ({detail})"));
            }
            if let Some(hint) = d.hint() {
                s.push_str(&format!("; hint: {hint}"));
            }
            s
        }
        None => e.to_string(),
    }
}

impl DbError {
    /// Another writer holds the lock past the wait: SQLite's `SQLITE_BUSY`/`LOCKED`, a
    /// server's `lock_timeout` (55P03).
    pub fn is_busy(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            DbError::Pg(e) => e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE),
            _ => false,
        }
    }

    /// The server refused because something is in use (55006): a replay's sender still
    /// renewing its lease.
    pub fn is_in_use(&self) -> bool {
        matches!(self, DbError::Pg(e) if e.code() == Some(&postgres::error::SqlState::OBJECT_IN_USE))
    }

    /// A unique or exclusion constraint refused the write (another writer was first).
    pub fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.code == rusqlite::ErrorCode::ConstraintViolation
            }
            DbError::Pg(e) => e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }
}

pub enum Db {
    Sqlite(rusqlite::Connection),
    Pg(Box<RefCell<PgConn>>),
}

/// How to make the connection again: the driver's config and its TLS connector.
pub type Connector = (postgres::Config, postgres_native_tls::MakeTlsConnector);

pub struct PgConn {
    pub client: postgres::Client,
    /// Statements prepared on this connection, by their `?N` text.
    prepared: HashMap<String, postgres::Statement>,
    /// Where a lost connection is made again (between transactions only).
    connector: Option<Connector>,
    /// Inside `BEGIN … COMMIT`: a lost connection is an error then, never a new one (the
    /// rest of the transaction would run outside it).
    in_tx: bool,
    /// Connections made so far: what this process held on an earlier one (its session
    /// advisory locks) went with it.
    pub generation: u64,
}

impl PgConn {
    pub fn new(client: postgres::Client, connector: Option<Connector>) -> Self {
        PgConn {
            client,
            prepared: HashMap::new(),
            connector,
            in_tx: false,
            generation: 0,
        }
    }

    /// A connection the server or the network closed is dropped and made anew, outside
    /// a transaction: the next statement runs on a fresh session (`generation` + 1).
    fn usable(&mut self) -> Result<(), DbError> {
        if !self.client.is_closed() || self.in_tx {
            return Ok(());
        }
        let Some((config, tls)) = &self.connector else {
            return Ok(());
        };
        self.client = config.connect(tls.clone())?;
        self.prepared.clear();
        self.generation += 1;
        Ok(())
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, DbError> {
        self.usable()?;
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let st = self.client.prepare(&dollar_params(sql))?;
        self.prepared.insert(sql.to_string(), st.clone());
        Ok(st)
    }
}

/// `?1` → `$1` (the ledger's statements carry no `?` inside literals).
fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A value sent as whatever type the server's statement expects.
#[derive(Debug)]
struct PgParam(Value);

impl ToSql for PgParam {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                _ => i.to_string().as_str().to_sql(ty, out),
            },
            Value::Text(s) => s.as_str().to_sql(ty, out),
            Value::Blob(b) => b.as_slice().to_sql(ty, out),
            Value::Array(items) => items
                .iter()
                .cloned()
                .map(PgParam)
                .collect::<Vec<_>>()
                .to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

fn pg_params(values: Vec<Value>) -> Vec<PgParam> {
    values.into_iter().map(PgParam).collect()
}

fn pg_refs(params: &[PgParam]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|x| x as &(dyn ToSql + Sync)).collect()
}

fn pg_row(r: &postgres::Row) -> Result<Row, DbError> {
    let mut values = Vec::with_capacity(r.len());
    for (i, c) in r.columns().iter().enumerate() {
        let v = match *c.type_() {
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Type::INT4 => r
                .try_get::<_, Option<i32>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::INT2 => r
                .try_get::<_, Option<i16>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::BOOL => r
                .try_get::<_, Option<bool>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
            _ => r.try_get::<_, Option<String>>(i)?.map(Value::Text),
        };
        values.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef as V;
    match v {
        V::Null => Value::Null,
        V::Integer(i) => Value::Int(i),
        V::Real(f) => Value::Text(f.to_string()),
        // Valid UTF-8 is checked by the fast path first; only bad bytes pay for the
        // lossy walk.
        V::Text(t) => Value::Text(match std::str::from_utf8(t) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        V::Blob(b) => Value::Blob(b.to_vec()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Value::Array(_) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "arrays are for the team ledger's functions only".into(),
                ))
            }
        })
    }
}

impl Db {
    fn values(p: &[&dyn ToValue]) -> Vec<Value> {
        p.iter().map(|v| v.to_value()).collect()
    }

    /// Run a statement; the rows it changed.
    pub fn execute(&self, sql: &str, p: &[&dyn ToValue]) -> Result<u64, DbError> {
        let values = Self::values(p);
        match self {
            Db::Sqlite(c) => {
                let n = c
                    .prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(values.iter()))?;
                Ok(n as u64)
            }
            Db::Pg(c) => {
                let mut c = c.borrow_mut();
                let st = c.statement(sql)?;
                let params = pg_params(values);
                Ok(c.client.execute(&st, &pg_refs(&params))?)
            }
        }
    }

    /// Every row of a query.
    pub fn query(&self, sql: &str, p: &[&dyn ToValue]) -> Result<Vec<Row>, DbError> {
        let values = Self::values(p);
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let n = st.column_count();
                let mut rows = st.query(rusqlite::params_from_iter(values.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    let mut vals = Vec::with_capacity(n);
                    for i in 0..n {
                        vals.push(sqlite_value(r.get_ref(i)?));
                    }
                    out.push(Row(vals));
                }
                Ok(out)
            }
            Db::Pg(c) => {
                let mut c = c.borrow_mut();
                let st = c.statement(sql)?;
                let params = pg_params(values);
                c.client
                    .query(&st, &pg_refs(&params))?
                    .iter()
                    .map(pg_row)
                    .collect()
            }
        }
    }

    /// Rows mapped by `f`. Each row is handed over, so long text can be moved out of it
    /// (`Row::take_text`) rather than copied.
    pub fn map<T>(
        &self,
        sql: &str,
        p: &[&dyn ToValue],
        f: impl FnMut(Row) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        self.query(sql, p)?.into_iter().map(f).collect()
    }

    /// The first row, if any.
    pub fn opt<T>(
        &self,
        sql: &str,
        p: &[&dyn ToValue],
        f: impl FnOnce(Row) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError> {
        self.query(sql, p)?.into_iter().next().map(f).transpose()
    }

    /// The first row (`NoRow` if none).
    pub fn one<T>(
        &self,
        sql: &str,
        p: &[&dyn ToValue],
        f: impl FnOnce(Row) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.opt(sql, p, f)?.ok_or(DbError::NoRow)
    }

    /// Statements without parameters or results (DDL, transaction control).
    pub fn batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Pg(c) => {
                let mut c = c.borrow_mut();
                c.usable()?;
                Ok(c.client.batch_execute(sql)?)
            }
        }
    }

    /// Open a transaction with `sql`; on failure nothing is left open (a PostgreSQL
    /// connection whose transaction failed refuses every later statement until it is
    /// rolled back — one lock timeout must not poison the connection).
    pub fn begin_with(&self, sql: &str) -> Result<(), DbError> {
        let r = self.open_tx(sql);
        // A connection the server or the network ended while it sat idle fails its
        // first statement; nothing reached a live session, so it is tried once more on a
        // new connection. (A replay's next write is then refused by its fence: its
        // holder lock went with the old connection.)
        if r.is_err() && self.connection_lost() {
            return self.open_tx(sql);
        }
        r
    }

    fn open_tx(&self, sql: &str) -> Result<(), DbError> {
        if let Db::Pg(c) = self {
            let mut c = c.borrow_mut();
            c.usable()?;
            c.in_tx = true;
        }
        let r = self.batch(sql);
        if r.is_err() {
            self.rollback();
        }
        r
    }

    /// The server's connection is gone (its session ended, the network cut).
    fn connection_lost(&self) -> bool {
        matches!(self, Db::Pg(c) if c.borrow().client.is_closed())
    }

    /// One writer at a time: every write appends to the audit chain, so writes are
    /// serialised from before the head is read.
    pub fn begin_write(&self) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => self.begin_with("BEGIN IMMEDIATE"),
            // The audit table's write lock, taken by the server's `dlq.write_lock()` (no
            // team role can take it any other way: an advisory lock anyone could hold
            // would stall everyone). Waited for up to `lock_timeout`; a holder that stops
            // mid-transaction loses it to the server's `idle_in_transaction_session_timeout`
            // (see `server::session_settings`), or to the next writer (`team_fences`).
            Db::Pg(_) => self.begin_with("BEGIN; SELECT dlq.write_lock()"),
        }
    }

    /// SQLite's write lock without the audit table (which a new ledger does not have yet).
    pub fn begin_write_sqlite(&self) -> Result<(), DbError> {
        self.begin_with("BEGIN IMMEDIATE")
    }

    /// A read snapshot: several reads see one state of every table.
    pub fn begin_read(&self) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => self.begin_with("BEGIN DEFERRED"),
            Db::Pg(_) => self.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
        }
    }

    /// Commit; a commit that fails is rolled back (SQLite keeps a busy transaction open).
    pub fn commit(&self) -> Result<(), DbError> {
        let r = self.batch("COMMIT");
        if r.is_err() {
            self.rollback();
        }
        self.closed_tx();
        r
    }

    pub fn rollback(&self) {
        let _ = self.batch("ROLLBACK");
        self.closed_tx();
    }

    fn closed_tx(&self) {
        if let Db::Pg(c) = self {
            c.borrow_mut().in_tx = false;
        }
    }

    /// Connections made so far (0 for a file): what was held on an earlier one is gone.
    pub fn generation(&self) -> u64 {
        match self {
            Db::Sqlite(_) => 0,
            Db::Pg(c) => c.borrow().generation,
        }
    }

    /// How long a statement waits for another writer's lock.
    pub fn set_lock_wait(&self, wait: std::time::Duration) {
        match self {
            Db::Sqlite(c) => {
                let _ = c.busy_timeout(wait);
            }
            Db::Pg(_) => {
                let _ = self.batch(&format!("SET lock_timeout = {}", wait.as_millis()));
            }
        }
    }

    pub fn is_pg(&self) -> bool {
        matches!(self, Db::Pg(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::p;

    #[test]
    fn question_marks_become_dollars_outside_nothing_else() {
        assert_eq!(
            dollar_params("SELECT a FROM t WHERE x = ?1 AND y IN (?2, ?10)"),
            "SELECT a FROM t WHERE x = $1 AND y IN ($2, $10)"
        );
    }

    #[test]
    fn sqlite_round_trips_every_value() {
        let db = Db::Sqlite(rusqlite::Connection::open_in_memory().expect("db"));
        db.batch("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, n TEXT)")
            .expect("ddl");
        let none: Option<&str> = None;
        db.execute(
            "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
            p![7u32, "x", b"\x00\xff".to_vec(), none],
        )
        .expect("insert");
        let (i, s, b, n) = db
            .one("SELECT i, s, b, n FROM t", p![], |r| {
                Ok((
                    r.get::<u32>(0)?,
                    r.get::<String>(1)?,
                    r.get::<Vec<u8>>(2)?,
                    r.get::<Option<String>>(3)?,
                ))
            })
            .expect("row");
        assert_eq!((i, s.as_str(), b, n), (7, "x", vec![0, 255], None));
        assert!(matches!(
            db.one("SELECT i FROM t WHERE i = 8", p![], |r| r.get::<i64>(0)),
            Err(DbError::NoRow)
        ));
    }
}
