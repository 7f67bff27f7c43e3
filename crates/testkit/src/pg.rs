//! PostgreSQL for the team-ledger tests: a fresh database per test (created on the
//! server at `DLQ_TRIAGE_TEST_PG`, default `postgres://postgres@127.0.0.1:5432/test`,
//! dropped when the test ends), required in CI like the brokers.

/// The server the tests create their databases on.
pub fn admin_url() -> String {
    std::env::var("DLQ_TRIAGE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A database of its own for one test; dropped (with its connections) on drop.
pub struct TempDb {
    pub url: String,
    name: String,
}

impl TempDb {
    /// `None` (skipped, with a message) when there is no server, unless required.
    pub fn create() -> Option<TempDb> {
        let admin = admin_url();
        let client = postgres::Client::connect(&admin, postgres::NoTls);
        let up = crate::service::present(
            client.is_ok(),
            "PostgreSQL on 127.0.0.1:5432",
            "start it (`pg_ctlcluster 15 main start`) or set DLQ_TRIAGE_TEST_PG",
        );
        let mut client = client.ok().filter(|_| up)?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "dlq_test_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
        Some(TempDb {
            url: format!("{base}/{name}"),
            name,
        })
    }

    /// A plain connection to this database (to tamper with it, or count rows).
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect")
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&admin_url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}
